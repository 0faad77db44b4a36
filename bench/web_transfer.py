"""The browser page against the `wormhole` CLI, side by side in one run: a 100 MiB file
page -> CLI and CLI -> page through Pigeonhole's relay, beside CLI -> CLI through the same
relay, on one `pigeonhole serve`.

    .venv/bin/python bench/web_transfer.py               # 100 MiB, 3 rounds, about a minute
    .venv/bin/python bench/web_transfer.py --mib 10 --rounds 1   # a smoke test

The page runs in Debian's headless Chromium (never a downloaded browser), driven over the
DevTools protocol alone through its `data-testid` automation contract (not Playwright,
whose network instrumentation copies every WebSocket frame into DevTools events: with it
the browser spent several times the CPU); a fresh browser context per transfer; received
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
import json
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import run  # noqa: E402  (bench/run.py: `pigeonhole serve` as bench/run.py starts it)
from tests.support.chromium import DevTools, chromium_binary, launch  # noqa: E402
from tests.support.wormhole_clients import sha256_file  # noqa: E402

WORMHOLE = str(Path(sys.executable).parent / "wormhole")
CODE_RE = re.compile(r"Wormhole code is: (\S+)")
PAGE_CODE_RE = re.compile(r"^\d+(-[a-z]+){2,}$")
MIB = 1 << 20
#: seconds one transfer may take before the run gives up on it
TIMEOUT = 300.0
DIRECTIONS = ("CLI -> CLI", "page -> CLI", "CLI -> page")


class BrowserCpu:
    """CPU seconds of the Chromium processes below this one (renderers, the service worker,
    the network and browser processes), sampled every 0.1 s by a thread, per thread: a
    context's renderer exits with it, so its time is kept from the samples (the last 0.1 s
    of a process that exits may be missed)."""

    def __init__(self) -> None:
        # (pid, tid): (process kind, thread name, first, last CPU seconds)
        self._seen: dict[tuple[int, int], tuple[str, str, float, float]] = {}
        self._kinds: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _kind(self, pid: int) -> str:
        """browser, renderer, network, gpu, ... from the process's --type and sub-type."""
        if pid not in self._kinds:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                # a zygote's child rewrites its command line as one string
                args = f.read().decode(errors="replace").replace("\0", " ").split()
            flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
            kind = flags.get("type", "browser")
            if "utility-sub-type" in flags:
                kind = flags["utility-sub-type"].split(".")[0]
            self._kinds[pid] = kind
        return self._kinds[pid]

    def _sample(self, pid: int) -> None:
        kind = self._kind(pid)
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
            except OSError:
                continue
            name = head.split("(", 1)[1]
            fields = rest.split()
            now = (int(fields[11]) + int(fields[12])) / run.CLK_TCK  # utime, stime
            key = (pid, int(tid))
            first = self._seen[key][2] if key in self._seen else now
            self._seen[key] = (kind, name, first, now)

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
                    self._sample(pid)
                except OSError:
                    continue

    def threads(self) -> dict[str, float]:
        """CPU seconds so far by process kind and thread name (threads of one name summed)."""
        out: dict[str, float] = {}
        for kind, name, first, last in list(self._seen.values()):
            out[f"{kind}: {name}"] = out.get(f"{kind}: {name}", 0.0) + last - first
        return out

    def seconds(self) -> float:
        return sum(self.threads().values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def children_cpu() -> float:
    """CPU seconds of the child processes waited for so far (the CLIs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Chromium:
    """Debian's Chromium, headless, through the tests' launcher (tests/support/chromium.py:
    its flags, stopped by PID), driven over the DevTools protocol alone: no network
    instrumentation (Playwright enables the Network domain, which copies every WebSocket
    frame's payload into a DevTools event, a cost no person's browser pays)."""

    def __init__(self, work: Path) -> None:
        self._stack = contextlib.ExitStack()
        launched = self._stack.enter_context(launch(work / "profile"))
        self.port = launched.port
        self.browser = DevTools(launched.browser_socket, timeout=TIMEOUT)
        self._stack.callback(self.browser.close)

    @contextlib.contextmanager
    def page(self, url: str, downloads: Path) -> Iterator[tuple[DevTools, str]]:
        """A new page showing `url` in a fresh browser context (its own service worker and
        storage) whose downloads go to `downloads`: its DevTools connection and context id."""
        context = self.browser.call("Target.createBrowserContext")["browserContextId"]
        self.browser.call(
            "Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads),
            browserContextId=context, eventsEnabled=True,
        )  # fmt: skip
        target = self.browser.call(
            "Target.createTarget", url="about:blank", browserContextId=context
        )
        page = DevTools(f"ws://127.0.0.1:{self.port}/devtools/page/{target['targetId']}", TIMEOUT)
        try:
            page.call("Page.enable")
            page.call("Page.navigate", url=url)
            page.wait_event("Page.loadEventFired", lambda _: True, 30)
            yield page, context
        finally:
            page.close()
            self.browser.call("Target.disposeBrowserContext", browserContextId=context)

    def close(self) -> None:
        self._stack.close()


def by_id(testid: str) -> str:
    return f"document.querySelector('[data-testid={testid}]')"


class Bench:
    """One server with its relay, one browser, a work directory; runs single transfers."""

    def __init__(self, server: run.Server, relay_port: int, browser: Chromium, work: Path) -> None:
        self.server = server
        self.relay_port = relay_port
        self.browser = browser
        self.work = work
        self.base_url = f"http://127.0.0.1:{server.port}"
        self.n = 0
        self.cpu = BrowserCpu()
        #: seconds between the code appearing and the receiver being given it
        self.typing = 0.0

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

    @staticmethod
    def wait_state(page: DevTools, state: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while (now := page.evaluate(f"{by_id('transfer')}.dataset.state")) != state:
            if now == "failed" or time.monotonic() > deadline:
                said = page.evaluate(f"{by_id('transfer')}.innerText")
                raise RuntimeError(f"the page is {now!r}: {said!r}")
            time.sleep(0.02)

    # -- one transfer each way; each returns (seconds, the received file)

    def cli_to_cli(self, source: Path) -> tuple[float, Path]:
        sender, scwd = self.cli("send", "--no-qr", str(source))
        code = self.code_of(sender, scwd)
        time.sleep(self.typing)
        start = time.monotonic()
        receiver, rcwd = self.cli("receive", "--accept-file", "-o", "received.bin", code)
        self.finish(receiver, rcwd)
        elapsed = time.monotonic() - start
        self.finish(sender, scwd)
        return elapsed, rcwd / "received.bin"

    def page_to_cli(self, source: Path) -> tuple[float, Path]:
        with self.browser.page(self.base_url + "/", self.work) as (page, _context):
            page.call("DOM.enable")
            root = page.call("DOM.getDocument")["root"]["nodeId"]
            node = page.call("DOM.querySelector", nodeId=root, selector="[data-testid=send-file]")
            page.call("DOM.setFileInputFiles", files=[str(source)], nodeId=node["nodeId"])
            page.evaluate(f"{by_id('send-button')}.click()")
            deadline = time.monotonic() + 30
            while not PAGE_CODE_RE.match(code := page.evaluate(f"{by_id('code')}.textContent")):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the page showed no code ({code!r})")
                time.sleep(0.02)
            time.sleep(self.typing)
            start = time.monotonic()
            receiver, rcwd = self.cli("receive", "--accept-file", "-o", "received.bin", code)
            self.finish(receiver, rcwd)
            elapsed = time.monotonic() - start
            self.wait_state(page, "done")
        return elapsed, rcwd / "received.bin"

    def cli_to_page(self, source: Path) -> tuple[float, Path]:
        sender, scwd = self.cli("send", "--no-qr", str(source))
        code = self.code_of(sender, scwd)
        with self.browser.page(self.base_url + "/", scwd) as (page, _context):
            time.sleep(self.typing)
            start = time.monotonic()
            page.evaluate(f"{by_id('receive-code')}.value = {json.dumps(code)}")
            page.evaluate(f"{by_id('receive-button')}.click()")
            deadline = time.monotonic() + 60
            while not page.evaluate(f"{by_id('accept-button')}.offsetParent !== null"):
                if time.monotonic() > deadline:
                    raise RuntimeError("the page showed no offer")
                time.sleep(0.02)
            page.evaluate(f"{by_id('accept-button')}.click()")
            self.browser.browser.wait_event(
                "Browser.downloadProgress", lambda e: e.get("state") == "completed", TIMEOUT
            )
            elapsed = time.monotonic() - start
            self.wait_state(page, "done")
        self.finish(sender, scwd)
        target = scwd / source.name
        if not target.exists():
            raise RuntimeError(f"no {source.name} downloaded into {scwd}")
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


def measure(
    bench: Bench, source: Path, rounds: int, threads: dict[str, dict[str, float]] | None = None
) -> tuple[dict[str, list[float]], Cpu]:
    """Times and CPU of each transfer; with `threads`, also sums the browser's CPU seconds by
    thread into it, per direction."""
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
            by_thread = bench.cpu.threads()
            elapsed, got = runs[direction](source)
            time.sleep(0.2)  # a last sample of the renderer that just exited
            now = (bench.cpu.seconds(), children_cpu(), bench.server.cpu_seconds())
            cpu[direction].append(tuple(b - a for a, b in zip(at, now, strict=True)))
            if threads is not None:
                mine = threads.setdefault(direction, {})
                for name, seconds in bench.cpu.threads().items():
                    mine[name] = mine.get(name, 0.0) + seconds - by_thread.get(name, 0.0)
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


def report_threads(threads: dict[str, dict[str, float]], rounds: int) -> None:
    """The browser's threads that used the most CPU, per transfer (mean over the rounds)."""
    for direction, seconds in threads.items():
        if direction == "CLI -> CLI":
            continue
        print(f"\n| {direction}: browser thread | CPU s per transfer |\n|---|---|")
        for name, total in sorted(seconds.items(), key=lambda kv: -kv[1])[:12]:
            if total / rounds >= 0.01:
                print(f"| {name} | {total / rounds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=100, help="file size in MiB")
    parser.add_argument("--rounds", type=int, default=3, help="transfers per direction")
    parser.add_argument(
        "--threads", action="store_true", help="also the browser's CPU per thread, per direction"
    )
    parser.add_argument(
        "--typing-seconds", type=float, default=0.0,
        help="wait this long after the code appears before the receiver gets it (a person "
        "passing it on; the sending page hashes its file meanwhile); default 0: at once",
    )  # fmt: skip
    args = parser.parse_args()

    relay_port = run.free_port()
    spec = run.ServerSpec("pigeonhole", "Pigeonhole", "pigeonhole", "disk")
    server = run.make_server(spec, Path(), ["--transit-port", str(relay_port)])
    work = run.disk_tmpdir("bench-web-")
    source = work / "source.bin"
    with open(source, "wb") as f:
        for _ in range(args.mib):
            f.write(os.urandom(MIB))
    server.start()
    print(f"# {args.mib} MiB, {args.rounds} round(s), code given {args.typing_seconds:g} s after "
          f"it appears; pigeonhole serve on {server.port}, relay on {relay_port}; "
          f"Chromium {chromium_binary()}; work in {work}", flush=True)  # fmt: skip
    try:
        browser = Chromium(work)
        try:
            transfers = work / "transfers"
            transfers.mkdir()
            with browser.page(f"http://127.0.0.1:{server.port}/", transfers):
                pass  # a first page, so Chromium's helper processes start before measuring
            bench = Bench(server, relay_port, browser, transfers)
            bench.typing = args.typing_seconds
            try:
                threads: dict[str, dict[str, float]] | None = {} if args.threads else None
                times, cpu = measure(bench, source, args.rounds, threads)
            finally:
                bench.cpu.close()
        finally:
            browser.close()
    finally:
        server.stop()
    report(times, cpu, args.mib)
    if threads is not None:
        report_threads(threads, args.rounds)
    with contextlib.suppress(OSError):
        source.unlink()


if __name__ == "__main__":
    main()
