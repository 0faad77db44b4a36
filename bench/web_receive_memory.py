"""A slow sink in Chromium: the `wormhole` CLI sends a file to the browser client's core on
a blank page, whose sink takes 40 ms a write (about 6 MiB/s), once with the relay's bytes
over a `WebSocketStream` (read only when the sink is ready: back-pressure to the relay and
the sender) and once over the plain `WebSocket` (the browser queues whatever arrives).
Prints the page's peak memory and the time of each, side by side in one run.

    .venv/bin/python bench/web_receive_memory.py            # 24 MiB, about 10 s a mode
    .venv/bin/python bench/web_receive_memory.py --mib 100

The client is the end-to-end tests' bundle (tests/web/client_bundle.py: web/src/wormhole as
the global `Wormhole`) in Debian's headless Chromium, started by the tests' launcher
(tests/support/chromium.py: their flags, stopped by PID), a fresh browser per mode, and
driven over DevTools alone. The page's memory is its JS heap plus its array buffers'
backing stores (`Runtime.getHeapUsage`), read every 0.2 s right after a forced collection,
so garbage not yet collected is not counted. Both the page's and the server's relay see
every byte: the CLI runs with `--no-listen`, and a page cannot open TCP.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import run  # noqa: E402  (bench/run.py: `pigeonhole serve` as the benchmarks start it)
from tests.support.chromium import DevTools, launch, page_socket  # noqa: E402
from tests.web.client_bundle import client_bundle  # noqa: E402

MIB = 1 << 20
WORMHOLE = str(Path(sys.executable).parent / "wormhole")
CODE_RE = re.compile(r"Wormhole code is: (\S+)")
#: seconds one transfer may take
TIMEOUT = 600.0
#: the option that keeps the client on the plain WebSocket
MODES = {"WebSocketStream": "", "WebSocket": "WebSocketStream: null,"}

RECEIVE = """(async () => {
  const started = performance.now();
  const result = await Wormhole.receive({ ...%(where)s, %(mode)s
    onOffer: async () => true,
    openSink: async () => ({ write: () => new Promise((r) => setTimeout(r, 40)),
      close: async () => {}, abort: async () => {} }) });
  return { result, seconds: (performance.now() - started) / 1000 };
})()"""


def start_sender(server: run.Server, relay_port: int, source: Path) -> tuple[Any, str]:
    """`wormhole send --no-listen` of `source`: the process and its code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
    log = source.with_suffix(".log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [WORMHOLE, "--relay-url", server.url, "--transit-helper",
             f"tcp:127.0.0.1:{relay_port}", "send", "--no-listen", "--hide-progress", "--no-qr",
             str(source)],
            cwd=source.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (m := CODE_RE.search(log.read_text(errors="replace"))):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the CLI sender printed no code: {log}")
        time.sleep(0.02)
    return proc, m.group(1)


def receive(work: Path, where: dict[str, Any], mode: str) -> tuple[dict[str, Any], int]:
    """One receive in a fresh Chromium: its outcome and the page's peak memory (bytes)."""
    with launch(work / f"profile-{mode}") as browser:
        page = DevTools(page_socket(browser.port), timeout=TIMEOUT)
        try:
            page.evaluate(client_bundle())
            expression = RECEIVE % {"where": json.dumps(where), "mode": MODES[mode]}
            running = page.send(
                "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
            )
            peak = 0
            deadline = time.monotonic() + TIMEOUT
            while running not in page.replies:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{mode}: not received in {TIMEOUT:g} s")
                page.call("HeapProfiler.collectGarbage")
                usage = page.call("Runtime.getHeapUsage")
                peak = max(peak, int(usage["usedSize"]) + int(usage.get("backingStorageSize", 0)))
                time.sleep(0.2)
            outcome = DevTools.value(page.reply(running))
        finally:
            page.close()
    return dict(outcome), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=24, help="file size in MiB")
    args = parser.parse_args()

    relay_port = run.free_port()
    spec = run.ServerSpec("pigeonhole", "Pigeonhole", "pigeonhole", "disk")
    server = run.make_server(spec, Path(), ["--transit-port", str(relay_port)])
    work = Path(tempfile.mkdtemp(prefix="bench-web-receive-memory-"))
    source = work / "slow.bin"
    with open(source, "wb") as f:
        for _ in range(args.mib):
            f.write(os.urandom(MIB))
    server.start()
    print(f"# {args.mib} MiB CLI -> a blank page's client, sink 40 ms a write; "
          f"pigeonhole serve on {server.port}, relay on {relay_port}", flush=True)  # fmt: skip
    try:
        for mode in MODES:
            sender, code = start_sender(server, relay_port, source)
            where = {
                "mailboxUrl": server.url,
                "transitUrl": f"ws://127.0.0.1:{server.port}/transit",
                "tcpRelay": {"host": "127.0.0.1", "port": relay_port},
                "code": code,
            }
            try:
                outcome, peak = receive(work, where, mode)
            finally:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    sender.wait(60)
                if sender.poll() is None:
                    sender.kill()
                    sender.wait()
            size = outcome["result"].get("size")
            if size != args.mib * MIB or sender.returncode != 0:
                raise RuntimeError(f"{mode}: {outcome}, the sender exited {sender.returncode}")
            print(
                f"{mode:<16} {args.mib} MiB, sink ~6 MiB/s: peak page memory "
                f"{peak / MIB:.1f} MiB, {outcome['seconds']:.1f} s",
                flush=True,
            )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
