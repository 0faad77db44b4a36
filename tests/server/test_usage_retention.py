"""`--usage-retention-days`: old usage rows go in the background, recent ones stay, on both
stores; 0 is refused; the usage database's size is there for the status page.

The server runs with a retention of 30 days and a pass every tenth of a second. The test
writes rows into its real usage database (the SQLite file, or the PostgreSQL schema):
more old ones than a window holds, then recent ones, then a few old ones written late,
and a real exchange adds its own. Every old row goes; every other row stays.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from pigeonhole.config import ServerConfig
from pigeonhole.server.app import MailboxServer
from pigeonhole.store.retention import BATCH_ROWS, USAGE_TIMES
from tests.server.status_support import exchange
from tests.support.process import PIGEONHOLE
from tests.support.server import Client, open_client

DAY = 86400.0
OLD, RECENT, LATE_OLD = 2 * BATCH_ROWS + 200, 30, 5
#: how long the test waits for the old rows to go (a pass takes milliseconds)
WAIT = 30.0

ROWS: dict[str, tuple[str, Any]] = {
    "nameplates": (
        "app_id, started, waiting_time, total_time, result",
        lambda t: ("seed", t, 1.0, 2.0, "happy"),
    ),
    "mailboxes": (
        "app_id, for_nameplate, started, waiting_time, total_time, result",
        lambda t: ("seed", True, t, 1.0, 2.0, "happy"),
    ),
    "client_versions": (
        "app_id, side, connect_time, implementation, version",
        lambda t: ("seed", "s", t, "python", "0.1"),
    ),
    "connection_counts": (
        "sampled, connections, bound, subscribed, nameplates, mailboxes",
        lambda t: (t, 1, 1, 1, 1, 1),
    ),
    "transit": (
        "started, total_time, waiting_time, total_bytes, result",
        lambda t: (t, 2.0, 1.0, 100, "happy"),
    ),
}


def seed_times(now: float) -> list[float]:
    """Old rows in id order, then recent ones with old ones written late among them."""
    recent = [now - 10 * DAY + n for n in range(RECENT)]
    return (
        [now - 40 * DAY + n for n in range(OLD)]
        + recent[: RECENT // 2]
        + [now - 35 * DAY + n for n in range(LATE_OLD)]
        + recent[RECENT // 2 :]
    )


async def seed(srv: MailboxServer, now: float, times: list[float] | None = None) -> None:
    times = seed_times(now) if times is None else times
    for table, (columns, row) in ROWS.items():
        marks = ", ".join("?" * len(columns.split(",")))
        rows = [row(t) for t in times]
        if srv.config.store is None:
            with sqlite3.connect(srv.config.usage_db) as db:
                db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
        else:
            numbered = ", ".join(f"${n + 1}" for n in range(len(columns.split(","))))
            conn = await asyncpg.connect(srv.config.store)
            try:
                await conn.executemany(
                    f"INSERT INTO usage.{table} ({columns}) VALUES ({numbered})", rows
                )
            finally:
                await conn.close()


async def times_of(config: ServerConfig, table: str, column: str) -> list[float]:
    if config.store is None:
        with sqlite3.connect(config.usage_db) as db:
            return [t for (t,) in db.execute(f"SELECT {column} FROM {table} ORDER BY id")]
    conn = await asyncpg.connect(config.store)
    try:
        return [r[0] for r in await conn.fetch(f"SELECT {column} FROM usage.{table} ORDER BY id")]
    finally:
        await conn.close()


async def test_old_usage_rows_go_recent_ones_stay(make_server: Any) -> None:
    clients: list[Client] = []

    async def bound(side: str, appid: str, srv: MailboxServer) -> Client:
        client = await open_client(srv.url)
        clients.append(client)
        await client.bind(appid, side)
        return client

    async with make_server(usage_retention_days=30, usage_retention_interval=0.1) as srv:
        size_before = await srv.ctx.storage.usage_bytes()
        now = time.time()
        await seed(srv, now)
        assert await srv.ctx.storage.usage_bytes() > size_before
        await exchange(bound, "42", srv=srv)  # real rows of this moment
        await srv.sample_usage()
        retention = srv.ctx.storage.retention
        assert retention is not None
        deadline = time.monotonic() + WAIT
        while retention.deleted < 5 * (OLD + LATE_OLD):  # counted as each pass ends
            assert time.monotonic() < deadline, retention.deleted
            await asyncio.sleep(0.1)
        assert retention.deleted == 5 * (OLD + LATE_OLD)
        left = {table: await times_of(srv.config, table, column) for table, column in USAGE_TIMES}
    cutoff = now - 30 * DAY
    for table, kept in left.items():
        assert min(kept) >= cutoff, table
        recent = [t for t in kept if t < now - DAY]
        assert recent == [now - 10 * DAY + n for n in range(RECENT)], table
        if table != "transit":  # the exchange's own rows (no relay was used)
            assert any(t >= now - 60 for t in kept), table


async def test_retention_is_off_by_default(make_server: Any) -> None:
    assert ServerConfig().usage_retention_days is None
    async with make_server() as srv:
        assert srv.ctx.storage.retention is None
        assert await srv.ctx.storage.usage_bytes() > 0


@pytest.mark.parametrize("where", ["option", "config file"])
def test_a_retention_of_zero_days_is_refused(where: str, tmp_path: Any) -> None:
    if where == "option":
        args = ["--usage-retention-days", "0"]
    else:
        (tmp_path / "p.toml").write_text("usage-retention-days = 0\n")
        args = ["--config", str(tmp_path / "p.toml")]
    refused = subprocess.run(
        [*PIGEONHOLE, "serve", *args, "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "'--usage-retention-days': 0 is not in the range x>=1" in refused.stderr


def export(config: ServerConfig, out: Any) -> subprocess.CompletedProcess[str]:
    source = (
        ["--data-dir", str(config.data_dir)] if config.store is None else ["--store", config.store]
    )
    return subprocess.run(
        [*PIGEONHOLE, "export-usage", *source, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_each_tables_newest_row_stays_and_the_export_goes_on(
    make_server: Any, tmp_path: Any
) -> None:
    """A table whose every row is old keeps its newest: the export's cursor check (a
    dataset past the database's last id is another database's) still passes after it."""
    now = time.time()
    async with make_server() as srv:
        await seed(srv, now, [now - 40 * DAY + n for n in range(OLD)])
        config = srv.config
    exported = await asyncio.to_thread(export, config, tmp_path / "usage")
    assert exported.returncode == 0, exported.stderr
    async with make_server(usage_retention_days=30, usage_retention_interval=0.1) as srv:
        retention = srv.ctx.storage.retention
        assert retention is not None
        deadline = time.monotonic() + WAIT
        while retention.deleted < 5 * (OLD - 1):
            assert time.monotonic() < deadline, retention.deleted
            await asyncio.sleep(0.1)
        left = {table: await times_of(srv.config, table, column) for table, column in USAGE_TIMES}
    assert retention.deleted == 5 * (OLD - 1)
    for table in ROWS:
        assert left[table] == [now - 40 * DAY + OLD - 1], table
    again = await asyncio.to_thread(export, config, tmp_path / "usage")
    assert again.returncode == 0, again.stderr
