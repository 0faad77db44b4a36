"""`python -m pigeonhole.transit`: the transit relay alone, for tests and operators.

Not the product's CLI (`pigeonhole serve` hosts the relay): a small runner that serves one
`TransitRelay` on a TCP port (and optionally WebSocket transit on another) until SIGTERM or
SIGINT, then drains active pairs. It logs one "listening" line on stderr, with the ports
actually bound (so port 0 works). With `--usage-json` every usage record is written to
stdout as a JSON line with the reference relay's `--log-fd` keys (`mood` for the result).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.relay import TransitRelay
from pigeonhole.transit.usage import UsageRecord, UsageSink
from pigeonhole.transit.ws_listener import serve_websocket

log = logging.getLogger("pigeonhole.transit")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pigeonhole.transit", description="Run the transit relay alone."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=4001, help="TCP transit port (0: any)")
    parser.add_argument("--ws-port", type=int, help="also serve WebSocket transit here")
    parser.add_argument("--usage-json", action="store_true", help="usage records on stdout")
    parser.add_argument("--drain-timeout", type=float, help="seconds pairs get after SIGTERM")
    return parser.parse_args(argv)


def usage_json_line(record: UsageRecord) -> str:
    """One record as the reference's `--log-fd` writes it."""
    return json.dumps(
        {
            "started": record.started,
            "total_time": record.total_time,
            "waiting_time": record.waiting_time,
            "total_bytes": record.total_bytes,
            "mood": str(record.result),
        }
    )


def _print_usage(record: UsageRecord) -> None:
    print(usage_json_line(record), flush=True)


def _ignore(record: UsageRecord) -> None:
    return None


async def run(args: argparse.Namespace) -> None:
    """Serve until SIGTERM/SIGINT, then stop accepting and drain."""
    sink: UsageSink = _print_usage if args.usage_json else _ignore
    relay = TransitRelay(TransitConfig(), usage=sink)
    await relay.start(args.host, [args.port])
    ws_server = None
    where = f"{args.host}:{relay.ports[0]}"
    if args.ws_port is not None:
        ws_server = await serve_websocket(relay, args.host, args.ws_port)
        where += f" (WebSocket {args.host}:{ws_server.sockets[0].getsockname()[1]})"
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    log.info("transit relay listening on %s", where)
    await stopping.wait()
    if ws_server is not None:
        ws_server.close()
    await relay.stop(args.drain_timeout)


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    main()
