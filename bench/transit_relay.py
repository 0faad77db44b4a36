"""Transit relays side by side: the reference, a trivial asyncio relay, a bare splice
relay and Pigeonhole's, alone (on asyncio's default loop; these three are in
bench/transit_servers.py) and as `pigeonhole serve` hosts it (TCP to `--transit-port`,
WebSocket to `/transit` on the public port), each in its own process, run as a service
user without CAP_SYS_RESOURCE when this runs as root (`--as-root`: as root).

    .venv/bin/python bench/transit_relay.py            # default run, about 4 minutes
    .venv/bin/python bench/transit_relay.py --seconds 1 --relays pigeonhole-serve  # smoke

Each row sets up its pairs (1 or 100), then moves bytes for `--seconds` (or until
`--row-bytes` have gone, whichever is first) from load processes that cost little
(bench/transit_load.py: `sendfile` from memory, `splice` into /dev/null, several
processes), and reports MB/s over that window, the relay process's CPU seconds per GB
relayed (its user+system time as the kernel accounts it, /proc/PID/stat; for `serve`, its
process and descendants), the load processes' own CPU per GB (from their rusage: what the
machine spent outside the relay) and bytes sent but not delivered. Then memory per waiting
and per active connection (the relay's RSS growth over 200 connections); then each
relay's figures divided by the reference's, beside the targets (CPU s/GB: TCP at most
0.15x, WebSocket at most 0.35x; MB/s at 100 pairs at least 2x). On 2 cores the relay and
the load share the machine, so MB/s is bounded by both; CPU s/GB is the relay's own."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import run  # bench/run.py: Server, make_server (`pigeonhole serve` as bench/run.py starts it)
import transit_load  # bench/transit_load.py: the load's worker processes

HERE = Path(__file__).resolve().parent
TWIST = Path(sys.executable).parent / "twist"
TICK = os.sysconf("SC_CLK_TCK")
#: relays run as the systemd unit runs `serve`: a user of their own without CAP_SYS_RESOURCE
#: (the per-user pipe limit applies), reading and writing files as root may
SERVICE_UID = 61999
CAPS = "-all,+dac_override,+dac_read_search"
AS_SERVICE = [
    "setpriv", f"--reuid={SERVICE_UID}", f"--regid={SERVICE_UID}", "--clear-groups",
    f"--inh-caps={CAPS}", f"--ambient-caps={CAPS}", f"--bounding-set={CAPS}",
]  # fmt: skip
#: a row that has not finished by then is reported as such (a relay that lost an EOF)
ROW_TIMEOUT = 60


# -- measuring a relay process ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Process:
    def __init__(self, name: str, argv: list[str], ports: list[int]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [*as_service(), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for port in ports:
            wait_listening(port, self.proc, name)

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def rss(self) -> int:
        return rss_of(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class ServeProcess:
    """`pigeonhole serve` hosting the relay (bench/run.py's Server): its CPU and RSS are the
    serve process's and its descendants' (the relay runs in a child process of its own)."""

    def __init__(self, transit_port: int) -> None:
        extra = ["--transit-port", str(transit_port),
                 "--transit-max-connections-per-address", "100000"]  # fmt: skip
        self.server = run.make_server(run.SPECS["pigeonhole"], run.CACHE / "ref-venv", extra)
        self.server.argv = [*as_service(), *self.server.argv]
        self.server.start()
        wait_listening(transit_port, self.server.proc)

    def cpu(self) -> float:
        return self.server.cpu_seconds()

    def rss(self) -> int:
        return sum(rss_of(pid) for pid in self.server.pids())

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self.server.data_dir, ignore_errors=True)


def as_service() -> list[str]:
    """The prefix that runs a relay as a service user (nothing unless run as root)."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or os.environ.get("RELAYS_AS_ROOT"):
        return []
    return AS_SERVICE


def wait_listening(port: int, proc: subprocess.Popen[bytes] | None, name: str = "serve") -> None:
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
            return
        if time.monotonic() > deadline or proc is None or proc.poll() is not None:
            raise SystemExit(f"{name} did not start")
        time.sleep(0.05)


def rss_of(pid: int) -> int:
    with contextlib.suppress(OSError):
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) * 1024
    return 0


def start(kind: str) -> tuple[Process | ServeProcess, int, str | None]:
    """Start a relay under test: its process(es), its TCP port, its WebSocket URL if any."""
    port, ws_port = free_port(), free_port()
    me = [sys.executable, str(HERE / "transit_servers.py")]
    ws_url = f"ws://127.0.0.1:{ws_port}/"
    if kind == "reference":
        argv = [str(TWIST), "transitrelay", f"--port=tcp:{port}:interface=127.0.0.1",
                f"--websocket=tcp:{ws_port}:interface=127.0.0.1"]  # fmt: skip
        return Process(kind, argv, [port, ws_port]), port, ws_url
    if kind == "pigeonhole":
        argv = [*me, kind, "--port", str(port), "--ws-port", str(ws_port)]
        return Process(kind, argv, [port, ws_port]), port, ws_url
    if kind == "pigeonhole-serve":
        serve = ServeProcess(port)
        return serve, port, f"ws://127.0.0.1:{serve.server.port}/transit"
    return Process(kind, [*me, kind, "--port", str(port)], [port]), port, None


# -- the load (bench/transit_load.py, in worker processes) ---------------------------


hello = transit_load.hello
#: (relay, transport, pairs) -> (MB/s, relay CPU s/GB, load CPU s/GB, bytes lost), None if
#: the row did not end
Rates = dict[tuple[str, str, int], tuple[float, float, float, int] | None]
#: relay -> (bytes per waiting connection, bytes per active connection)
Memory = dict[str, tuple[float, float]]
TCP_KINDS = ["reference", "trivial", "splice", "pigeonhole", "pigeonhole-serve"]
WS_KINDS = ["reference", "pigeonhole", "pigeonhole-serve"]


def answer(pipe: Connection, timeout: float) -> Any:
    """A worker's next message; TimeoutError if none in time or the worker died."""
    try:
        if pipe.poll(max(0.0, timeout)):
            return pipe.recv()
    except EOFError:
        pass
    raise TimeoutError


def throughput(kind: str, transport: str, pairs: int, args: argparse.Namespace) -> tuple[
    float, float, float, int
]:  # fmt: skip
    """One row: every pair set up, then `args.seconds` (or the byte cap) of sending."""
    proc, port, ws_url = start(kind)
    ctx = multiprocessing.get_context("fork")
    workers = []
    try:
        if transport == "ws":
            assert ws_url is not None
            port = int(ws_url.split(":")[2].split("/")[0])
        path = "/" + ws_url.split("/", 3)[3] if ws_url else "/"
        tokens = [os.urandom(32).hex() for _ in range(pairs)]
        n = min(args.workers, 2 * pairs)
        for w in range(n):
            job = transit_load.Job(w, n, transport, port, path, tokens,
                                   int(args.row_bytes / pairs), args.ws_frame)  # fmt: skip
            mine, theirs = ctx.Pipe()
            child = ctx.Process(target=transit_load.work, args=(job, theirs), daemon=True)
            child.start()
            workers.append((child, mine))
        if any(answer(pipe, 60) != "ready" for _, pipe in workers):
            raise TimeoutError
        cpu, began = proc.cpu(), time.monotonic()
        for _, pipe in workers:
            pipe.send(began + args.seconds)
        sent = moved = 0
        load_cpu = 0.0
        for _, pipe in workers:
            s, r, c = answer(pipe, began + args.seconds + ROW_TIMEOUT - time.monotonic())
            sent, moved, load_cpu = sent + s, moved + r, load_cpu + c
        seconds, used = time.monotonic() - began, proc.cpu() - cpu
    finally:
        for child, _ in workers:
            if child.is_alive():
                child.kill()
            child.join()
        proc.stop()
    gb = moved / 1e9
    return (
        moved / 1e6 / seconds,
        used / gb if gb else 0.0,
        load_cpu / gb if gb else 0.0,
        sent - moved,
    )


async def memory(kind: str) -> tuple[float, float]:
    proc, port, _ = start(kind)
    try:
        base = proc.rss()
        held = []
        for _ in range(200):  # waiting: 200 handshaken connections, none pairs
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(hello(os.urandom(32).hex(), "a" * 16))
            held.append(writer)
        await asyncio.sleep(1)
        waiting = (proc.rss() - base) / 200
        for writer in held:
            writer.close()
        await asyncio.sleep(1)
        base = proc.rss()
        for _ in range(100):  # active: 100 pairs after `ok`, idle
            token = os.urandom(32).hex()
            for side in ("a" * 16, "b" * 16):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(hello(token, side))
                held.append(writer)
            await reader.readexactly(3)
        await asyncio.sleep(1)
        active = (proc.rss() - base) / 200
    finally:
        proc.stop()
    return waiting, active


def measure_rates(args: argparse.Namespace) -> Rates:
    print(
        f"{args.seconds:g} s or {args.row_bytes / 1e9:g} GB per row, whichever first; "
        f"{args.workers} load processes; WebSocket frames of {args.ws_frame} bytes; relays "
        + ("as a service user without CAP_SYS_RESOURCE\n" if as_service() else "as this user\n")
    )
    print("| relay | transport | pairs | MB/s | relay CPU s/GB | load CPU s/GB | bytes lost |")
    print("|---|---|---|---|---|---|---|")
    rates: Rates = {}
    for transport, kinds in (("tcp", TCP_KINDS), ("ws", WS_KINDS)):
        for kind in kinds:
            if kind not in args.relays:
                continue
            for pairs in (1, 100):
                try:
                    row = rates[kind, transport, pairs] = throughput(kind, transport, pairs, args)
                except TimeoutError:
                    rates[kind, transport, pairs] = None
                    print(f"| {kind} | {transport} | {pairs} | (no end in time) | | | |")
                    continue
                mbps, cpu_per_gb, load_per_gb, lost = row
                figures = f"{mbps:,.0f} | {cpu_per_gb:.3f} | {load_per_gb:.3f} | {lost}"
                print(f"| {kind} | {transport} | {pairs} | {figures} |", flush=True)
    return rates


async def measure_memory(relays: list[str]) -> Memory:
    print("\n| relay | RSS per waiting connection | RSS per active connection |")
    print("|---|---|---|")
    sizes: Memory = {}
    for kind in [k for k in TCP_KINDS if k in relays]:
        waiting, active = sizes[kind] = await memory(kind)
        print(f"| {kind} | {waiting / 1024:.1f} KiB | {active / 1024:.1f} KiB |", flush=True)
    return sizes


#: a figure's name, each relay's figure divided by the reference's (TCP_KINDS[1:] in order),
#: and the issue's target: the bound and whether the figure must stay at most (-1) or at
#: least (+1) that, or None
RatioRow = tuple[str, list[float | None], tuple[float, int] | None]


def ratio(ours: float | None, reference: float | None) -> float | None:
    return ours / reference if ours is not None and reference else None


def ratio_rows(rates: Rates, sizes: Memory) -> list[RatioRow]:
    """Each relay's figures divided by the reference's, with the issue's target if any."""

    def rate(kind: str, transport: str, pairs: int, column: int) -> float | None:
        row = rates.get((kind, transport, pairs))
        return row[column] if row else None

    def against(transport: str, pairs: int, column: int) -> list[float | None]:
        reference = rate("reference", transport, pairs, column)
        return [ratio(rate(k, transport, pairs, column), reference) for k in TCP_KINDS[1:]]

    rows: list[RatioRow] = []
    for transport, bound in (("tcp", 0.15), ("ws", 0.35)):
        for pairs in (1, 100):
            name = f"{transport} CPU s/GB, {pairs} pair(s)"
            rows.append((name, against(transport, pairs, 1), (bound, -1)))
    for transport in ("tcp", "ws"):
        rows.append((f"{transport} MB/s at 100 pairs", against(transport, 100, 0), (2.0, +1)))
    for i, what in enumerate(("waiting", "active")):
        reference = sizes["reference"][i] if "reference" in sizes else None
        cells = [ratio(sizes[k][i], reference) if k in sizes else None for k in TCP_KINDS[1:]]
        rows.append((f"RSS per {what} connection", cells, None))
    return rows


def verdict(value: float | None, target: tuple[float, int] | None) -> str:
    if target is None or value is None:
        return ""
    bound, direction = target
    return "yes" if (value - bound) * direction >= 0 else "no"


def print_ratios(rates: Rates, sizes: Memory) -> None:
    """The ratio table; the last column says whether `pigeonhole serve` meets the target."""
    print(
        "\n| against the reference | " + " | ".join(TCP_KINDS[1:]) + " | target | serve meets it |"
    )
    print("|---" * (len(TCP_KINDS) + 2) + "|")
    for name, values, target in ratio_rows(rates, sizes):
        cells = " | ".join("-" if v is None else f"{v:.3g}x" for v in values)
        wanted = "" if target is None else f"{'<=' if target[1] < 0 else '>='} {target[0]:g}x"
        print(f"| {name} | {cells} | {wanted} | {verdict(values[-1], target)} |")


def main(args: argparse.Namespace) -> None:
    rates = measure_rates(args)
    sizes = asyncio.run(measure_memory(args.relays))
    print_ratios(rates, sizes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="sending time per row")
    parser.add_argument("--row-bytes", type=float, default=20e9,
                        help="bytes per row at most (all pairs together)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2, help="load processes")
    parser.add_argument("--ws-frame", type=int, default=64 * 1024,
                        help="payload bytes per WebSocket frame the load sends")  # fmt: skip
    parser.add_argument("--relays", default=",".join(TCP_KINDS), type=lambda text: text.split(","),
                        help="relays to run (a comma-separated list)")  # fmt: skip
    parser.add_argument("--as-root", action="store_true",
                        help="run the relays as root (no per-user pipe limit)")  # fmt: skip
    args = parser.parse_args()
    if args.as_root:
        os.environ["RELAYS_AS_ROOT"] = "1"
    main(args)
