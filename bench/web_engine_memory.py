"""The memory a browser holds while the page receives a large file from the `wormhole` CLI,
in Firefox and in WebKit (neither has `WebSocketStream`, so the page cannot slow the
relay down: what the disk has not taken waits in the browser).

    .venv/bin/python bench/web_engine_memory.py              # 1024 MiB, both engines
    .venv/bin/python bench/web_engine_memory.py --mib 100 --engines firefox

The browsers are the end-to-end tests' (tests/web/engines.py: Debian's firefox-esr through
puppeteer-core, WebKitGTK's MiniBrowser under xvfb-run through Selenium). The figure is the
resident set (RSS, /proc) summed over the browser's processes (not the driver's: node,
WebKitWebDriver, Xvfb), sampled every 0.2 s: before the transfer (the page loaded) and its
peak during it. The download is checked byte-exact (sha256) and removed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import run  # noqa: E402  (bench/run.py: `pigeonhole serve` as the benchmarks start it)
from tests.support.process import descendants  # noqa: E402
from tests.web.engines import ENGINES, engine_tab  # noqa: E402

MIB = 1 << 20
#: the drivers' own processes, not the browser's
DRIVERS = {"node", "WebKitWebDriver", "Xvfb", "xvfb-run", "sh"}


def browser_rss(root: int) -> int:
    """Bytes resident in the processes below `root`, drivers left out."""
    total = 0
    for pid in descendants(root):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            if name in DRIVERS:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue  # a process that just ended
    return total


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MIB):
            h.update(chunk)
    return h.hexdigest()


def measure(
    engine: str, base_url: str, mailbox: str, relay_port: int, source: Path, work: Path
) -> str:
    with engine_tab(engine, base_url, work / f"{engine}-downloads") as tab:
        tab.open()
        root = tab.proc.pid  # type: ignore[attr-defined]
        time.sleep(2)
        before = browser_rss(root)
        cli = subprocess.Popen(
            [str(Path(sys.executable).parent / "wormhole"), "--relay-url", mailbox,
             "--transit-helper", f"tcp:127.0.0.1:{relay_port}", "send", "--no-listen",
             "--hide-progress", "--no-qr", str(source)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert cli.stdout is not None
        code = ""
        for line in cli.stdout:
            if "Wormhole code is:" in line:
                code = line.split("Wormhole code is:")[1].split()[0]
                break
        threading.Thread(target=cli.stdout.read, daemon=True).start()  # keep its pipe drained
        peak = before
        started = time.monotonic()
        tab.enter_code(code)
        tab.accept()
        while tab.state() not in ("done", "failed"):
            peak = max(peak, browser_rss(root))
            time.sleep(0.2)
        seconds = time.monotonic() - started
        state = tab.state()
        cli.wait(60)
        got = (
            tab.downloaded(source.name, source.stat().st_size, timeout=120)
            if state == "done"
            else None
        )
        exact = got is not None and sha256(got) == sha256(source)
        if got is not None:
            got.unlink()
        return (
            f"| {engine} {getattr(tab, 'version', '')} | {source.stat().st_size // MIB} MiB | "
            f"{state}, {'byte-exact' if exact else 'NOT exact'} | {seconds:.1f} s | "
            f"{before / MIB:.0f} MiB | {peak / MIB:.0f} MiB | {(peak - before) / MIB:+.0f} MiB |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    args = parser.parse_args()
    relay_port = run.free_port()
    server = run.make_server(run.ServerSpec("pigeonhole", "Pigeonhole", "pigeonhole", "disk"),
                             Path(), ["--transit-port", str(relay_port)])  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-web-memory-", dir=run.disk_tmpdir("bench-web-")))
    source = work / f"payload-{args.mib}.bin"
    with open(source, "wb") as f:
        for _ in range(args.mib):
            f.write(os.urandom(MIB))
    server.start()
    rows = []
    try:
        for engine in args.engines:
            rows.append(measure(engine, f"http://127.0.0.1:{server.port}", server.url, relay_port,
                                source, work))  # fmt: skip
            print(rows[-1], flush=True)
    finally:
        server.stop()
        source.unlink()
    print("| engine | file | result | time | browser RSS before | peak | peak - before |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
