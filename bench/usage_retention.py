"""What a usage retention pass costs on SQLite: windows, the event loop, the writer's commits.

A real usage.sqlite gets ROWS old rows in each usage table. A writer thread commits one
usage row a time (write + fdatasync, as the server's store does) for a baseline window,
then again while a retention pass deletes the old rows (store/retention.py). Printed: the
pass's rows, windows and time; the longest window; the event loop's longest stall (a
5 ms ticker's overshoot); the writer's commit p50/p99/max in both windows and their ratio;
the file's size before and after (the file keeps its pages: new rows reuse them).

    .venv/bin/python bench/usage_retention.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from pigeonhole.protocol import effects as fx
from pigeonhole.store.retention import (
    USAGE_TIMES,
    SqliteUsageWindows,
    prune_usage,
    usage_file_bytes,
)
from pigeonhole.store.sqlite import SqliteStore

DAY = 86400.0


def seed(usage: Path, rows: int, when: float) -> None:
    with sqlite3.connect(usage) as db:
        for table, column in USAGE_TIMES:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})") if r[1] != "id"]
            values = {c: 1 for c in columns} | {column: when}
            for text in ("app_id", "result", "side", "implementation", "version"):
                if text in values:
                    values[text] = "x"
            marks = ",".join("?" * len(columns))
            row = tuple(values[c] for c in columns)
            db.executemany(
                f"INSERT INTO {table} ({','.join(columns)}) VALUES ({marks})",
                (row for _ in range(rows)),
            )


def commits(store: SqliteStore, stop: threading.Event, out: list[float]) -> None:
    """Commit one usage row at a time until told (at most 100,000)."""
    for _ in range(100_000):
        if stop.is_set():
            return
        began = time.perf_counter()
        store.write([fx.UsageMailbox("bench", True, time.time(), 1.0, 2.0, "happy")])
        store.sync()
        out.append(time.perf_counter() - began)


def quantiles(samples: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49] * 1e3, cuts[98] * 1e3, max(samples) * 1e3


async def main(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        store = SqliteStore(data / "channel.sqlite", data / "usage.sqlite")
        store.open()
        seed(data / "usage.sqlite", rows, time.time() - 40 * DAY)
        size_before = usage_file_bytes(data / "usage.sqlite")

        stall = [0.0, 0.0]
        phase = [0]
        ticking = True

        async def ticker() -> None:
            while ticking:
                began = time.perf_counter()
                await asyncio.sleep(0.005)
                late = time.perf_counter() - began - 0.005
                stall[phase[0]] = max(stall[phase[0]], late)

        tick = asyncio.create_task(ticker())
        baseline: list[float] = []
        stop = threading.Event()
        writer = threading.Thread(target=commits, args=(store, stop, baseline))
        writer.start()
        await asyncio.sleep(3.0)
        stop.set()
        writer.join()
        phase[0] = 1

        windows = SqliteUsageWindows(data / "usage.sqlite")
        spans: list[float] = []

        async def timed(*args: object) -> tuple[int, int | None]:
            began = time.perf_counter()
            found = await windows(*args)  # type: ignore[arg-type]
            spans.append(time.perf_counter() - began)
            return found

        during: list[float] = []
        stop = threading.Event()
        writer = threading.Thread(target=commits, args=(store, stop, during))
        writer.start()
        began = time.perf_counter()
        deleted = await prune_usage(timed, time.time() - 30 * DAY)
        took = time.perf_counter() - began
        ticking = False
        await tick
        stop.set()
        writer.join()
        windows.close()
        store.close()

        print(
            f"rows deleted: {deleted} in {len(spans)} windows, {took:.2f} s"
            f" ({deleted / took:,.0f} rows/s, with 20 ms between windows)"
        )
        print(
            f"window: median {statistics.median(spans) * 1e3:.2f} ms,"
            f" longest {max(spans) * 1e3:.2f} ms (thread hop included)"
        )
        print(
            f"event loop's longest stall: baseline {stall[0] * 1e3:.2f} ms,"
            f" during the pass {stall[1] * 1e3:.2f} ms"
        )
        b, d = quantiles(baseline), quantiles(during)
        print(
            f"writer commit ms p50/p99/max, baseline: {b[0]:.2f}/{b[1]:.2f}/{b[2]:.2f}"
            f" ({len(baseline)} commits)"
        )
        print(
            f"writer commit ms p50/p99/max, during:   {d[0]:.2f}/{d[1]:.2f}/{d[2]:.2f}"
            f" ({len(during)} commits); p99 ratio {d[1] / b[1]:.2f}"
        )
        print(
            f"usage.sqlite: {size_before / 1e6:.1f} MB before,"
            f" {usage_file_bytes(data / 'usage.sqlite') / 1e6:.1f} MB after"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="old rows per usage table")
    asyncio.run(main(parser.parse_args().rows))
