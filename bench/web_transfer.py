"""The browser page against the `wormhole` CLI, side by side in one run: a 100 MiB file
page -> CLI and CLI -> page through Pigeonhole's relay, beside CLI -> CLI through the same
relay, on one `pigeonhole serve`.

    .venv/bin/python bench/web_transfer.py               # 100 MiB, 3 rounds, about 2 minutes
    .venv/bin/python bench/web_transfer.py --mib 10 --rounds 1   # a smoke test

The page runs in Debian's headless Chromium (Playwright, `executable_path`, never a
downloaded browser) and is driven through its `data-testid` automation contract; received
files stream to disk as browser downloads. Every CLI runs with `--no-listen` and our relay
as its transit helper, and the page can only use the relay's WebSocket, so every transfer
crosses the relay (each round checks the relay's usage records for a `happy` pair that
carried the file). One transfer's time runs from the moment the receiving side is given
the code (the sender already waits) until the receiver has the whole file: the CLI
receiver's exit, or the page's `data-state` `done` after the download finished. Rounds
alternate the three directions; the table gives the median and best of each, and the
page's median divided by the CLI -> CLI median (the issue's target: within 2x), and the
CPU seconds each transfer cost the browser (all its processes), the CLIs and the server (a
machine shared with other work stretches times; CPU seconds say where the work is).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import run  # bench/run.py: Server, make_server (`pigeonhole serve` as bench/run.py starts it)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic",
]  # fmt: skip
WORMHOLE = str(Path(sys.executable).parent / "wormhole")
CODE_RE = re.compile(r"Wormhole code is: (\S+)")
PAGE_CODE_RE = re.compile(r"^\d+(-[a-z]+){2,}$")
MIB = 1 << 20
#: seconds one transfer may take before the run gives up on it
TIMEOUT = 300.0
DIRECTIONS = ("CLI -> CLI", "page -> CLI", "CLI -> page")


class BrowserCpu:
    """CPU seconds of the Chromium processes below this one (renderers, the service worker,
    the network and browser processes), sampled every 0.1 s by a thread: a context's
    renderer exits with it, so its time is kept from the samples (the last 0.1 s of a process
    that exits may be missed)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[float, float]] = {}  # pid: (first, last) CPU seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            kids, todo = run._children(), [os.getpid()]
            while todo:
                pid = todo.pop()
                todo.extend(kids.get(pid, []))
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        if not f.read().startswith("chrom"):
                            continue
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                now = (int(fields[11]) + int(fields[12])) / run.CLK_TCK  # utime, stime
                self._seen[pid] = (self._seen.get(pid, (now, now))[0], now)

    def seconds(self) -> float:
        return sum(last - first for first, last in self._seen.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def children_cpu() -> float:
    """CPU seconds of the child processes waited for so far (the CLIs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


class Bench:
    """One server with its relay, one browser, a work directory; runs single transfers."""

    def __init__(self, server: run.Server, relay_port: int, browser: Any, work: Path) -> None:
        self.server = server
        self.relay_port = relay_port
        self.browser = browser
        self.work = work
        self.base_url = f"http://127.0.0.1:{server.port}"
        self.n = 0
        self.cpu = BrowserCpu()

    # -- the CLI

    def cli(self, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        self.n += 1
        cwd = self.work / f"{self.n:03d}-{args[0]}"
        cwd.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        argv = [
            WORMHOLE, "--relay-url", self.server.url,
            "--transit-helper", f"tcp:127.0.0.1:{self.relay_port}",
            args[0], "--no-listen", "--hide-progress", *args[1:],
        ]  # fmt: skip
        with open(cwd / "output.log", "wb") as out:
            proc = subprocess.Popen(
                argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env,
            )  # fmt: skip
        return proc, cwd

    @staticmethod
    def code_of(proc: subprocess.Popen[bytes], cwd: Path) -> str:
        deadline = time.monotonic() + 30
        while not (m := CODE_RE.search((cwd / "output.log").read_text(errors="replace"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the CLI sender printed no code: {cwd}/output.log")
            time.sleep(0.02)
        return m.group(1)

    @staticmethod
    def finish(proc: subprocess.Popen[bytes], cwd: Path) -> None:
        try:
            status = proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the CLI did not finish in {TIMEOUT:g} s: {cwd}") from None
        if status != 0:
            raise RuntimeError(f"the CLI exited {status}: {cwd}/output.log")

    # -- the page

    @contextlib.contextmanager
    def page(self) -> Iterator[Any]:
        context = self.browser.new_context(accept_downloads=True)
        try:
            page = context.new_page()
            page.goto(self.base_url + "/")
            yield page
        finally:
            context.close()

    @staticmethod
    def wait_state(page: Any, state: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        transfer = page.get_by_test_id("transfer")
        while (now := transfer.get_attribute("data-state")) != state:
            if now == "failed" or time.monotonic() > deadline:
                raise RuntimeError(f"the page is {now!r}: {transfer.inner_text()!r}")
            page.wait_for_timeout(20)

    # -- one transfer each way; each returns (seconds, the received file)

    def cli_to_cli(self, source: Path) -> tuple[float, Path]:
        sender, scwd = self.cli("send", "--no-qr", str(source))
        code = self.code_of(sender, scwd)
        start = time.monotonic()
        receiver, rcwd = self.cli("receive", "--accept-file", "-o", "received.bin", code)
        self.finish(receiver, rcwd)
        elapsed = time.monotonic() - start
        self.finish(sender, scwd)
        return elapsed, rcwd / "received.bin"

    def page_to_cli(self, source: Path) -> tuple[float, Path]:
        with self.page() as page:
            page.get_by_test_id("send-file").set_input_files(str(source))
            page.get_by_test_id("send-button").click()
            code_el = page.get_by_test_id("code")
            deadline = time.monotonic() + 30
            while not PAGE_CODE_RE.match(code := code_el.inner_text().strip()):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the page showed no code ({code!r})")
                page.wait_for_timeout(20)
            start = time.monotonic()
            receiver, rcwd = self.cli("receive", "--accept-file", "-o", "received.bin", code)
            self.finish(receiver, rcwd)
            elapsed = time.monotonic() - start
            self.wait_state(page, "done")
        return elapsed, rcwd / "received.bin"

    def cli_to_page(self, source: Path) -> tuple[float, Path]:
        sender, scwd = self.cli("send", "--no-qr", str(source))
        code = self.code_of(sender, scwd)
        with self.page() as page:
            start = time.monotonic()
            page.get_by_test_id("receive-code").fill(code)
            page.get_by_test_id("receive-button").click()
            accept = page.get_by_test_id("accept-button")
            accept.wait_for(state="visible", timeout=TIMEOUT * 1000)
            started: list[Any] = []
            page.once("download", lambda d: started.append(d))
            accept.click()
            self.wait_state(page, "done")  # raises if the page failed
            page.wait_for_timeout(100)
            if not started:
                raise RuntimeError("the page is done, but no download started")
            got = started[0].path()  # waits until the download has finished
            elapsed = time.monotonic() - start
            target = scwd / "downloaded.bin"
            os.replace(got, target)
        self.finish(sender, scwd)
        return elapsed, target


def relay_pairs(data_dir: Path, min_bytes: int) -> int:
    """`happy` pairs that carried at least `min_bytes`, from the server's usage database."""
    db = data_dir / "db" / "usage.sqlite"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM transit WHERE result = 'happy' AND total_bytes >= ?",
            (min_bytes,),
        ).fetchone()
    return int(count)


Cpu = dict[str, list[tuple[float, float, float]]]


def measure(bench: Bench, source: Path, rounds: int) -> tuple[dict[str, list[float]], Cpu]:
    runs: dict[str, Callable[[Path], tuple[float, Path]]] = {
        "CLI -> CLI": bench.cli_to_cli,
        "page -> CLI": bench.page_to_cli,
        "CLI -> page": bench.cli_to_page,
    }
    want = sha256_file(source)
    size = source.stat().st_size
    times: dict[str, list[float]] = {d: [] for d in DIRECTIONS}
    cpu: dict[str, list[tuple[float, float, float]]] = {d: [] for d in DIRECTIONS}
    for r in range(rounds):
        order = DIRECTIONS[r % 3 :] + DIRECTIONS[: r % 3]  # each direction first once in 3
        for direction in order:
            before = relay_pairs(bench.server.data_dir, size)
            at = (bench.cpu.seconds(), children_cpu(), bench.server.cpu_seconds())
            elapsed, got = runs[direction](source)
            time.sleep(0.2)  # a last sample of the renderer that just exited
            now = (bench.cpu.seconds(), children_cpu(), bench.server.cpu_seconds())
            cpu[direction].append(tuple(b - a for a, b in zip(at, now, strict=True)))
            if sha256_file(got) != want:
                raise RuntimeError(f"{direction}: the received file differs ({got})")
            got.unlink()
            deadline = time.monotonic() + 10
            while relay_pairs(bench.server.data_dir, size) <= before:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{direction}: no relay pair carried the file")
                time.sleep(0.1)
            times[direction].append(elapsed)
            b, c, v = cpu[direction][-1]
            print(
                f"round {r + 1} {direction}: {elapsed:.2f} s (CPU s: browser {b:.2f}, CLIs "
                f"{c:.2f}, server {v:.2f}; machine load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    return times, cpu


def report(times: dict[str, list[float]], cpu: Cpu, mib: int) -> None:
    base = statistics.median(times["CLI -> CLI"])
    print(
        f"\n| {mib} MiB through the relay | median | best | MB/s (median) | ÷ CLI -> CLI "
        "| CPU s, median: browser | CLIs | server |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for direction in DIRECTIONS:
        median = statistics.median(times[direction])
        rate = mib * MIB / median / 1e6
        parts = [statistics.median(c[i] for c in cpu[direction]) for i in range(3)]
        print(
            f"| {direction} | {median:.2f} s | {min(times[direction]):.2f} s | {rate:.1f} | "
            f"{median / base:.2f}x | " + " | ".join(f"{p:.2f}" for p in parts) + " |"
        )
    worst = max(statistics.median(times[d]) for d in DIRECTIONS[1:]) / base
    verdict = "PASS" if worst <= 2.0 else "FAIL"
    print(f"\n{verdict} the page within 2x of CLI -> CLI: slower direction {worst:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=100, help="file size in MiB")
    parser.add_argument("--rounds", type=int, default=3, help="transfers per direction")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    relay_port = run.free_port()
    spec = run.ServerSpec("pigeonhole", "Pigeonhole", "pigeonhole", "disk")
    server = run.make_server(spec, Path(), ["--transit-port", str(relay_port)])
    work = run.disk_tmpdir("bench-web-")
    source = work / "source.bin"
    with open(source, "wb") as f:
        for _ in range(args.mib):
            f.write(os.urandom(MIB))
    server.start()
    print(f"# {args.mib} MiB, {args.rounds} round(s); pigeonhole serve on {server.port}, "
          f"relay on {relay_port}; Chromium {CHROMIUM}; work in {work}", flush=True)  # fmt: skip
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
                downloads_path=str(work / "downloads"),
            )  # fmt: skip
            try:
                transfers = work / "transfers"
                transfers.mkdir()
                bench = Bench(server, relay_port, browser, transfers)
                try:
                    times, cpu = measure(bench, source, args.rounds)
                finally:
                    bench.cpu.close()
            finally:
                browser.close()
    finally:
        server.stop()
    report(times, cpu, args.mib)
    with contextlib.suppress(OSError):
        source.unlink()


if __name__ == "__main__":
    main()
