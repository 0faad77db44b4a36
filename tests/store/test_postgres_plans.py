"""The batch functions' reads follow the batch, not the tables (schema versions 9-11).

A node's connection keeps each statement's generic plan from its first call, made from
the table sizes the planner saw then. Here the plans are made beside empty tables (as
on a node started at a quiet hour, or a database that is never analyzed), then a crowd
of waiting clients fills the tables, unanalyzed, and the same connection runs the same
batch. What the batch reads from the tables, counted by PostgreSQL's own statistics
(index entries returned and rows scanned in `channel`), must be the same beside a crowd
of 15,000 as beside 5,000, and beside either as beside none but for testing the drawn
long names. A plan that hash-joins a table reads all of its rows:
version 8's touch of a batch's mailboxes and its test of drawn long names did, and an
allocation up to version 9 counted the 999 short names taken (version 10 reads its counts),
and up to version 10 listed every taken name of the shortest length with a free number
(version 11 looks up a few drawn numbers)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson

from pigeonhole.store.postgres import POSTGRES_VERSION, schema_sql
from pigeonhole.store.postgres.schema import upgrade_file
from tests.support.postgres import postgres_url, run

__all__ = ["postgres_url"]

APP = "lothar.com/wormhole/text-or-file-xfer"
#: the batch's own channels: nameplates 20001-20004 and their mailboxes, one side each
OWN = [str(n) for n in range(20_001, 20_005)]


def _spec() -> dict[str, Any]:
    """What a batch that claims, opens, adds and allocates loads."""
    return {
        "names": [[APP, name] for name in OWN],
        "mailboxes": [[APP, f"own{name}"] for name in OWN],
        "apps": [],
        "bodies": [],
        "owners": ["10.0.0.1"],
        "seq": True,
        "allocates": [APP],
        "long": [[APP, n] for n in ("123456", "4321", "654321")],
        "wanted": {APP: 1},
    }


def _batch(now: float) -> dict[str, Any]:
    """What such a batch writes: sides, a touch of its mailboxes, a channel closed."""
    mailboxes = [f"own{name}" for name in OWN]
    return {
        "parts": [
            ["put_nameplate_side", [[APP, OWN[0], "s2", True, now]]],
            ["put_mailbox_side", [[APP, mailboxes[0], "s2", True, now, None]]],
            ["touch", [[APP, m, now] for m in mailboxes[:3]]],
            ["delete_nameplate", [[APP, OWN[3]]]],
            ["delete_mailbox", [[APP, mailboxes[3]]]],
        ]
    }


async def _crowd(conn: Any, first: int, last: int) -> None:
    """Waiting senders `first`..`last`: a nameplate, a mailbox, a side of each, a message."""
    for sql in (
        "INSERT INTO channel.nameplates (app_id, name, mailbox_id, owner)"
        " SELECT {app}, g::text, 'mb' || g, '10.1.' || g FROM generate_series({a}, {b}) g",
        "INSERT INTO channel.nameplate_sides (app_id, name, side, claimed, added)"
        " SELECT {app}, g::text, 's1', true, 1.0 FROM generate_series({a}, {b}) g",
        "INSERT INTO channel.mailboxes (app_id, id, for_nameplate, created, owner, updated)"
        " SELECT {app}, 'mb' || g, true, 1.0, '10.1.' || g, 1.0 FROM generate_series({a}, {b}) g",
        "INSERT INTO channel.mailbox_sides (app_id, mailbox_id, side, opened, added, mood)"
        " SELECT {app}, 'mb' || g, 's1', true, 1.0, NULL FROM generate_series({a}, {b}) g",
        "INSERT INTO channel.messages (seq, app_id, mailbox_id, side, phase, body,"
        " body_is_text, server_rx, msg_id, owner, size)"
        " SELECT g, {app}, 'mb' || g, 's1', 'pake', '\\x00ff'::bytea, false, 1.0, '\"1\"',"
        " '10.1.' || g, 2 FROM generate_series({a}, {b}) g",
    ):
        await conn.execute(sql.format(app="'" + APP + "'", a=first, b=last))


async def _own(conn: Any) -> None:
    """The batch's channels, fresh: deleted and made again before each run."""
    for table in ("nameplate_sides", "nameplates"):
        await conn.execute(
            f"DELETE FROM channel.{table} WHERE app_id = $1 AND name = ANY($2::text[])", APP, OWN
        )
    await conn.execute(
        "DELETE FROM channel.mailbox_sides WHERE app_id = $1 AND mailbox_id LIKE 'own%'", APP
    )
    await conn.execute("DELETE FROM channel.mailboxes WHERE app_id = $1 AND id LIKE 'own%'", APP)
    for name in OWN:
        await conn.execute(
            "INSERT INTO channel.nameplates (app_id, name, mailbox_id, owner)"
            " VALUES ($1, $2, $3, '10.0.0.1')",
            APP, name, f"own{name}",
        )  # fmt: skip
        await conn.execute(
            "INSERT INTO channel.mailboxes (app_id, id, for_nameplate, created, owner, updated)"
            " VALUES ($1, $2, true, 1.0, '10.0.0.1', 1.0)",
            APP, f"own{name}",
        )  # fmt: skip
        await conn.execute(
            "INSERT INTO channel.mailbox_sides (app_id, mailbox_id, side, opened, added)"
            " VALUES ($1, $2, 's1', true, 1.0)",
            APP, f"own{name}",
        )  # fmt: skip


async def _schema(conn: Any) -> None:
    """Every schema file in order, as a new database gets them, in one transaction."""
    async with conn.transaction():
        await conn.execute(schema_sql("postgres-v1.sql"))
        for version in range(1, POSTGRES_VERSION):
            await conn.execute(schema_sql(upgrade_file(version)))


@contextlib.asynccontextmanager
async def _node_and_observer(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """A node's connection and an observer's, on a new schema; the node makes its plans
    at its first batch."""
    observer = await asyncpg.connect(url)
    node = await asyncpg.connect(url)
    try:
        await _schema(observer)
        yield node, observer
    finally:
        await node.close()
        await observer.close()


async def _reads(observer: Any) -> int:
    """Index entries returned and rows scanned in schema `channel` so far (every backend's
    statistics, as flushed)."""
    await observer.execute("SELECT pg_stat_clear_snapshot()")
    return int(
        await observer.fetchval(
            "SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes"
            "        WHERE schemaname = 'channel')"
            "     + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables"
            "        WHERE schemaname = 'channel')"
        )
    )


async def _run_batch(node: Any, observer: Any, now: float) -> tuple[int, Any]:
    """One batch on the node's connection, as the store runs it: what it read, and the
    allocation's answer."""
    await _own(observer)
    for conn in (observer, node):  # both backends' counts so far, flushed when idle
        await conn.execute("SELECT pg_stat_force_next_flush()")
    before = await _reads(observer)
    async with node.transaction():
        loaded = orjson.loads(
            await node.fetchval(
                "SELECT channel.lock_and_load($1::jsonb)::text", orjson.dumps(_spec()).decode()
            )
        )
        assert len(loaded["mailboxes"]) == len(OWN)  # the batch's own, nothing else
        await node.execute(
            "SELECT channel.apply_batch($1::jsonb)", orjson.dumps(_batch(now)).decode()
        )
    await node.execute("SELECT pg_stat_force_next_flush()")
    return await _reads(observer) - before, loaded["allocates"][0]


def test_a_batch_reads_the_same_beside_15000_waiting_as_beside_5000(postgres_url: str) -> None:
    async def check() -> None:
        async with _node_and_observer(postgres_url) as (node, observer):
            # the node's plans are made here, beside empty tables
            empty, allocation = await _run_batch(node, observer, 2.0)
            assert allocation[2:4] == [1, "taken"]  # the shortest length: 1-9
            await _crowd(observer, 1, 5_000)
            beside_5000, allocation = await _run_batch(node, observer, 3.0)
            assert allocation[2] == 0 and allocation[5] == ["123456", "654321"]  # 4321 is taken
            await _crowd(observer, 5_001, 15_000)
            beside_15000, allocation = await _run_batch(node, observer, 4.0)
            assert allocation[2] == 0 and allocation[5] == ["123456", "654321"]
            touched = await observer.fetchval(
                "SELECT count(*) FROM channel.mailboxes WHERE updated = 4.0"
            )
            assert touched == 3
        # 1-999 are taken beside either crowd: an allocation reads their counts (a few
        # rows; version 9 counted 999 index entries) and tests its drawn long names one by
        # one; the rest is the batch's own
        assert empty < 200
        assert beside_5000 <= empty + 20, (empty, beside_5000, beside_15000)
        assert beside_15000 <= beside_5000 + 20, (empty, beside_5000, beside_15000)

    run(check)


def test_an_allocation_draws_beside_the_exchanges_own_names(postgres_url: str) -> None:
    """Beside 300 and then 800 three-digit names taken (exchanges in flight hold them
    themselves), an allocation looks up a few drawn numbers (version 11) instead of
    reading every taken name of the length, with plans made beside empty tables: 47 and
    55 entries read against 33 beside none (version 10 read 345 and 845)."""

    async def check() -> None:
        async with _node_and_observer(postgres_url) as (node, observer):
            empty, allocation = await _run_batch(node, observer, 2.0)
            await _crowd(observer, 1, 399)  # 1-99 and 300 of three digits: mostly free
            beside_300, allocation = await _run_batch(node, observer, 3.0)
            assert allocation[1:4] == [[9, 90, 300], 3, "free"] and len(allocation[4]) == 1
            assert 400 <= allocation[4][0] <= 999
            await _crowd(observer, 400, 899)  # 800 of three digits: mostly taken
            beside_800, allocation = await _run_batch(node, observer, 4.0)
            assert allocation[1:4] == [[9, 90, 800], 3, "free"] and len(allocation[4]) == 1
            assert 900 <= allocation[4][0] <= 999
        # about 9 lookups expected beside 800 (900 / 100), 1.5 beside 300, each an entry
        # at most; and the long names' lookups are not made (1-999 are not all taken)
        assert beside_300 <= empty + 20, (empty, beside_300, beside_800)
        assert beside_800 <= empty + 60, (empty, beside_300, beside_800)

    run(check)
