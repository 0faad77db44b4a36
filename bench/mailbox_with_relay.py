"""Mailbox latency beside a steady transit relay load: the relay hosted by `pigeonhole
serve` against today's two-program deployment, side by side in one run.

    .venv/bin/python bench/mailbox_with_relay.py       # default run, about 2 minutes
    .venv/bin/python bench/mailbox_with_relay.py --rounds 1 --measure 3 --relay-pairs 4
                                                       # a smoke test

Every row runs `pigeonhole serve` on SQLite as bench/run.py starts it (its `Server`) and
bench/loadgen.py keeping `--concurrency` (100) mailbox exchanges in flight against it
(bench/run.py's `run_level`: warm-up, one measured window, the same percentiles):

    A   `serve` (the relay on, default options), the relay load through `--transit-port`
    B   `serve --no-transit`, the relay load through the reference `twist transitrelay`
    B2  `serve --no-transit`, the relay load through `python -m pigeonhole.transit`
    C   `serve --no-transit`, no relay load at all (the baseline)

The relay load (`--relay-load`, a process of its own so it shares no Python with the
mailbox load generator): `--relay-pairs` TCP pairs, each side's handshake, `ok`, then a
sender writing at its share of `--relay-rate` (paced) and a receiver reading, from before
the mailbox warm-up until the measured window has ended. Relay MB/s is what receivers got
within the window; CPU is that of the server's processes (with B, B2 the relay process's
added) over the window; the relay load's own CPU is shown apart. The verdict lines compare
A's message p99 (delivery, the issue's figure) with B's and B2's: at most 1.25x. With
`--rounds` above 1 the rows run in turn, round after round, and each figure is the median.
Only processes this script started are signalled, by their PID.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import run  # bench/run.py: Server, make_server, run_level, percentiles as it reports them
import transit_relay  # bench/transit_relay.py: relay processes, the handshake line

HERE = Path(__file__).resolve().parent
ROWS = {
    "A": "A: serve hosting the relay",
    "B": "B: serve --no-transit + reference relay",
    "B2": "B2: serve --no-transit + pigeonhole.transit",
    "C": "C: serve --no-transit, no relay load",
}
#: bytes a relay-load sender writes at a time
CHUNK = 128 * 1024
#: how often the relay load notes the bytes its receivers got so far
SAMPLE_EVERY = 0.1


# -- the relay load (run as `--relay-load PORT`, in its own process) ---------------------


@dataclass
class Load:
    received: int = 0
    sent: int = 0
    errors: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def paced_sender(writer: asyncio.StreamWriter, rate: float, load: Load) -> None:
    """Writes CHUNKs at `rate` bytes/s; a sender held back does not burst to catch up."""
    payload = os.urandom(CHUNK)
    loop = asyncio.get_running_loop()
    began, sent = loop.time(), 0
    while not load.stop.is_set():
        delay = began + sent / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        elif delay < -0.1:  # more than 0.1 s behind: start the pace again from now
            began, sent = loop.time(), 0
        writer.write(payload)
        await writer.drain()
        sent += CHUNK
        load.sent += CHUNK
    writer.close()


async def receiver(reader: asyncio.StreamReader, load: Load) -> None:
    while chunk := await reader.read(1 << 20):
        load.received += len(chunk)


async def relay_pair(port: int, rate: float, load: Load, ready: asyncio.Queue[None]) -> None:
    token = os.urandom(32).hex()
    (ra, wa), (rb, wb) = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
    wa.write(transit_relay.hello(token, "a" * 16))
    wb.write(transit_relay.hello(token, "b" * 16))
    for reader in (ra, rb):
        if await reader.readexactly(3) != b"ok\n":
            raise RuntimeError("the relay did not answer ok")
    ready.put_nowait(None)
    reading = asyncio.create_task(receiver(rb, load))
    await paced_sender(wa, rate, load)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(reading, 5)  # the bytes in flight, until the relay's close
    wb.close()


async def relay_load(args: argparse.Namespace) -> dict[str, Any]:
    """Starts the pairs, says `ready` on stdout, samples bytes received until stdin closes
    (or --seconds pass), then stops the senders and lets the receivers finish."""
    load, ready = Load(), asyncio.Queue[None]()
    rate = args.rate / args.pairs
    pairs = [
        asyncio.create_task(relay_pair(args.port, rate, load, ready)) for _ in range(args.pairs)
    ]
    for _ in range(args.pairs):
        await asyncio.wait_for(ready.get(), 30)
    print("ready", flush=True)
    stdin_closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
    samples: list[tuple[float, int]] = []
    deadline = time.time() + args.seconds
    while not stdin_closed.is_set() and time.time() < deadline:
        samples.append((time.time(), load.received))
        await asyncio.sleep(SAMPLE_EVERY)
    samples.append((time.time(), load.received))
    load.stop.set()
    for pair in asyncio.as_completed(pairs):
        try:
            await pair
        except Exception as error:  # reported, not raised: the row goes on
            load.errors.append(repr(error))
    return {"samples": samples, "sent": load.sent, "received": load.received,
            "errors": load.errors}  # fmt: skip


# -- the rows ---------------------------------------------------------------------------


class RelayLoad:
    """The relay load's process: started, waited for until every pair has its `ok`."""

    def __init__(self, port: int, args: argparse.Namespace) -> None:
        self.output = Path(run.disk_tmpdir("bench-relay-load-")) / "load.json"
        argv = [run.main_python(), str(HERE / "mailbox_with_relay.py"), "--relay-load",
                str(port), "--relay-pairs", str(args.relay_pairs), "--relay-rate",
                str(args.relay_rate), "--seconds", str(args.warmup_max + args.measure + 120),
                "--output", str(self.output)]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != b"ready":
            self.proc.kill()
            raise RuntimeError("the relay load did not start")

    def finish(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        result: dict[str, Any] = json.loads(self.output.read_text())
        shutil.rmtree(self.output.parent, ignore_errors=True)
        return result


class Deployment:
    """What run.run_level drives and reads: the mailbox server and the relay process beside
    it, if any. run_level reads cpu_seconds() at the measured window's two edges: the times
    of those reads say which relay-load samples fall in the window."""

    def __init__(self, server: run.Server, relay: transit_relay.Process | None) -> None:
        self.server, self.relay = server, relay
        self.url, self.url_b, self.admin_port = server.url, None, None
        #: the relay load generator's process, when there is one (its CPU is noted apart)
        self.load_pid: int | None = None
        #: (time, mailbox server CPU s, relay process CPU s, relay load CPU s) at each read
        self.reads: list[tuple[float, float, float, float]] = []

    def cpu_seconds(self) -> float:
        mailbox = self.server.cpu_seconds()
        relay = self.relay.cpu() if self.relay else 0.0
        load = cpu_of(self.load_pid) if self.load_pid else 0.0
        self.reads.append((time.time(), mailbox, relay, load))
        return mailbox + relay

    def memory_kib(self) -> float:
        return self.server.memory_kib()


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / transit_relay.TICK


def start_relay(row: str) -> tuple[transit_relay.Process | None, int | None]:
    """The separate relay process of rows B and B2; none for A (hosted) and C."""
    port = run.free_port()
    if row == "B":
        argv = [str(transit_relay.TWIST), "transitrelay",
                f"--port=tcp:{port}:interface=127.0.0.1"]  # fmt: skip
    elif row == "B2":
        argv = [run.main_python(), "-m", "pigeonhole.transit", "--host", "127.0.0.1",
                "--port", str(port)]  # fmt: skip
    else:
        return None, (port if row == "A" else None)
    return transit_relay.Process(row, argv, [port]), port


def bytes_at(samples: list[tuple[float, int]], when: float) -> float:
    """Bytes received by `when`, interpolated between the relay load's samples."""
    times = [t for t, _ in samples]
    i = bisect_left(times, when)
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, b0), (t1, b1) = samples[i - 1], samples[i]
    return b0 + (b1 - b0) * (when - t0) / (t1 - t0)


def run_row(row: str, args: argparse.Namespace) -> dict[str, Any]:
    relay, port = start_relay(row)
    extra = ["--transit-port", str(port)] if row == "A" else ["--no-transit"]
    server = run.make_server(run.SPECS["pigeonhole"], run.CACHE / "ref-venv", extra)
    deployment = Deployment(server, relay)
    load = None
    try:
        server.start()
        if port is not None:
            load = RelayLoad(port, args)
            deployment.load_pid = load.proc.pid
        level = run.run_level(deployment, args.concurrency, args)  # type: ignore[arg-type]
        figures = load.finish() if load else {"samples": [], "sent": 0, "received": 0, "errors": []}
        alive = server.alive() and (relay is None or relay.proc.poll() is None)
    finally:
        if load and load.proc.poll() is None:
            load.proc.kill()
        server.stop()
        if relay:
            relay.stop()
        shutil.rmtree(server.data_dir, ignore_errors=True)
    (t0, mail0, relay0, load0), (t1, mail1, relay1, load1) = deployment.reads[:2]
    moved = bytes_at(figures["samples"], t1) - bytes_at(figures["samples"], t0) if load else 0
    return {"row": row, "level": level.__dict__, "relay_mbps": moved / 1e6 / (t1 - t0),
            "mailbox_cpu": mail1 - mail0, "relay_cpu": relay1 - relay0, "alive": alive,
            "relay_load_cpu": load1 - load0,
            "relay_sent": figures["sent"], "relay_received": figures["received"],
            "relay_errors": figures["errors"]}  # fmt: skip


# -- the table --------------------------------------------------------------------------


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def table_row(row: str, results: list[dict[str, Any]]) -> str:
    """One row: each figure the median over the rounds (the figure itself with one round)."""
    levels = [r["level"] for r in results]

    def ms(key: str) -> str:
        return run.fmt_ms(median([lv[key] for lv in levels if lv[key] is not None] or [0.0]))

    cpu = median([r["mailbox_cpu"] + r["relay_cpu"] for r in results])
    relay_cpu = median([r["relay_cpu"] for r in results])
    split = f" ({relay_cpu:.2f} relay process)" if row in ("B", "B2") else ""
    failed = sum(lv["failed"] for lv in levels)
    errors = sum(len(r["relay_errors"]) for r in results)
    return (
        f"| {ROWS[row]} | {median([lv['rate'] for lv in levels]):,.0f}/s | "
        f"{ms('exchange_p50')} / {ms('exchange_p99')} | {ms('delivery_p99')} | "
        f"{median([r['relay_mbps'] for r in results]):,.0f} | {cpu:.2f}{split} | "
        f"{median([r['relay_load_cpu'] for r in results]):.2f} | {failed} / {errors} |"
    )


def p99_ratios(by_row: dict[str, list[dict[str, Any]]], other: str) -> str:
    """A's message and exchange p99 over `other`'s; the issue's target is on delivery, the
    message p99: at most 1.25x."""

    def p99(row: str, key: str) -> float:
        return median([r["level"][key] for r in by_row[row] if r["level"][key] is not None])

    message = p99("A", "delivery_p99") / p99(other, "delivery_p99")
    exchange = p99("A", "exchange_p99") / p99(other, "exchange_p99")
    verdict = "PASS" if message <= 1.25 else "FAIL"
    return (
        f"- {verdict} A ÷ {other}: message p99 {message:.2f}x (target: at most 1.25x); "
        f"exchange p99 {exchange:.2f}x"
    )


def report(by_row: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    rounds = len(next(iter(by_row.values())))
    lines = [
        f"{args.concurrency} mailbox exchanges in flight; relay load {args.relay_pairs} TCP "
        f"pairs at {args.relay_rate / 1e6:g} MB/s in all; {args.measure:g} s measured per row, "
        f"{rounds} round(s)" + (" (medians)" if rounds > 1 else "") + ".",
        "",
        "| row | exchanges/s | exchange p50 / p99 | message p99 | relay MB/s | server CPU s "
        "| relay load CPU s | failed exchanges / relay pairs |",
        "|---|---|---|---|---|---|---|---|",
        *(table_row(row, results) for row, results in by_row.items()),
    ]
    for row, results in by_row.items():  # said only when it happens
        lost = sum(r["relay_sent"] - r["relay_received"] for r in results)
        if lost:
            lines.append(f"\n{ROWS[row]}: {lost:,} relay bytes sent were never received")
        if not all(r["alive"] for r in results):
            lines.append(f"\n{ROWS[row]}: the server or the relay died during the row")
    ratios = [
        p99_ratios(by_row, other) for other in ("B", "B2") if "A" in by_row and other in by_row
    ]
    return "\n".join(lines + (["", *ratios] if ratios else []))


def main(args: argparse.Namespace) -> None:
    rows = [r for r in args.rows.split(",") if r]
    by_row: dict[str, list[dict[str, Any]]] = {row: [] for row in rows}
    for round_ in range(args.rounds):
        for row in rows:
            run.wait_for_quiet(args.quiet_wait)
            result = run_row(row, args)
            by_row[row].append(result)
            lv = result["level"]
            run.log(f"round {round_ + 1} {row}: {lv['rate']:.0f}/s, exchange p99 "
                    f"{run.fmt_ms(lv['exchange_p99'])}, message p99 "
                    f"{run.fmt_ms(lv['delivery_p99'])}, relay {result['relay_mbps']:.0f} MB/s, "
                    f"other {lv['other_cores']:.2f} cores")  # fmt: skip
    text = report(by_row, args)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mailbox_with_relay.md").write_text(text + "\n")
    (out / "mailbox_with_relay.json").write_text(json.dumps(by_row, indent=1) + "\n")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="A,B,B2,C", help="which rows, in this order")
    ap.add_argument("--rounds", type=int, default=2, help="the rows in turn, this many times")
    ap.add_argument("--concurrency", type=int, default=100, help="mailbox exchanges in flight")
    ap.add_argument("--relay-pairs", type=int, default=20)
    ap.add_argument("--relay-rate", type=float, default=200e6, help="bytes/s of all pairs")
    ap.add_argument("--measure", type=float, default=10.0, help="seconds measured per row")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--warmup-max", type=float, default=20.0)
    ap.add_argument("--drain", type=float, default=20.0)
    ap.add_argument("--ramp", type=float, default=1.0)
    ap.add_argument("--messages", type=int, default=1)
    ap.add_argument("--procs", type=int, default=1, help="mailbox load generator processes")
    ap.add_argument("--procs-from", type=int, default=10)
    ap.add_argument("--client", default="raw", choices=["raw", "aiohttp", "websockets"])
    ap.add_argument("--quiet-wait", type=float, default=10.0)
    ap.add_argument("--out", default=str(HERE / "results"))
    # the relay load's own process
    ap.add_argument("--relay-load", type=int, metavar="PORT", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    ap.add_argument("--output", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.status_poll = 0.0  # run_level's option: no status page here
    return args


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.relay_load is not None:
        arguments.port, arguments.pairs, arguments.rate = (
            arguments.relay_load, arguments.relay_pairs, arguments.relay_rate
        )  # fmt: skip
        try:
            import uvloop

            outcome = uvloop.run(relay_load(arguments))
        except ImportError:
            outcome = asyncio.run(relay_load(arguments))
        Path(arguments.output).write_text(json.dumps(outcome))
    else:
        os.chdir(run.REPO)
        main(arguments)
