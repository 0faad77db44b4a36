"""What the status page costs the server (not a test): docs/status.md, "what they cost".

    .venv/bin/python bench/status_cost.py

An in-process MailboxServer on a temporary directory, its status rings filled with a full
hour of busy minutes (every result, every limit kind, more app ids than are kept),
then: the time to build /status.json (the dict, and orjson's bytes), its size, the time
to render /metrics from the same figures (prometheus_client), the time
of one timer tick (the common one, and one that closes a minute), the memory the rings
hold (tracemalloc, before and after the hour), and the page's size.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

from pigeonhole.config import ServerConfig
from pigeonhole.protocol.limits import LIMIT_ERRORS
from pigeonhole.server.admin import status_page
from pigeonhole.server.app import MailboxServer
from pigeonhole.server.exposition import Exposition
from pigeonhole.server.status import MINUTES, RESULTS, status_json


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def busy_minute(server: MailboxServer, i: int) -> None:
    """What a busy minute adds to the counters the rings read."""
    m, rz = server.ctx.metrics, server.ctx.rendezvous
    m.connections_total += 3000
    m.messages += 6000
    m.errors["other"] += 10
    m.permissions["granted"] += 5
    m.permissions["refused"] += 1
    for kind in LIMIT_ERRORS:
        m.limits[kind] += 1
    m.limits["slow reader"] += 1
    m.limits["connections per address"] += 2
    for _ in range(100):
        m.observe_commit(0.002)
    rz.mailboxes_created += 1500
    for r in RESULTS:
        rz.results[r] += 200
    for a in range(20):  # more app ids than a minute keeps (8)
        rz.created_by_app[f"example.org/app-{i}-{a}"] += 75


def per_call(fn: object, n: int) -> float:
    assert callable(fn)
    began = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - began) / n


async def main() -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="status-cost-") as data:
        config = ServerConfig(port=0, admin_port=0, transit_port=0, data_dir=Path(data))
        async with MailboxServer(config, clock=clock) as server:
            rings = server.status
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            for i in range(MINUTES):
                busy_minute(server, i)
                clock.offset += 60
                rings.tick()
            busy_minute(server, MINUTES)  # the minute in progress
            gc.collect()
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            held = sum(s.size_diff for s in after.compare_to(before, "filename"))
            assert len(rings.minutes) == MINUTES
            build = per_call(lambda: status_json(server.ctx, rings), 2000)
            encode = per_call(lambda: orjson.dumps(status_json(server.ctx, rings)), 2000)
            body = orjson.dumps(status_json(server.ctx, rings))
            tick = per_call(rings.tick, 100_000)
            exposition = Exposition(server.ctx)
            metrics = per_call(exposition.render, 2000)
            metrics_size = len(exposition.render())

            def closing_tick() -> None:
                clock.offset += 60
                rings.tick()

            roll = per_call(closing_tick, 2000)
    page = status_page()
    print(f"python {sys.version.split()[0]}")
    print(f"/status.json built (dict), full hour: {build * 1e6:.0f} us")
    print(f"/status.json built and encoded (orjson): {encode * 1e6:.0f} us")
    print(f"/status.json size, full hour: {len(body):,} bytes")
    print(f"/metrics rendered (prometheus_client): {metrics * 1e6:.0f} us, {metrics_size:,} bytes")
    print(f"tick, within a minute: {tick * 1e6:.2f} us; closing a minute: {roll * 1e6:.1f} us")
    print(f"rings' memory, full hour (tracemalloc): {held / 1024:.1f} KiB")
    print(f"page: {len(page):,} bytes")


if __name__ == "__main__":
    asyncio.run(main())
