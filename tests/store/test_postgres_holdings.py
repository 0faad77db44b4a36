"""`channel.holdings` on the real PostgreSQL: what each address holds, kept by triggers
(and `channel.short_taken`: each app's taken short numbers, kept the same way).

Writers on several connections at once (each its own app, all sharing a few owners,
some rows with no owner), reconnecting now and then (new backends: new shards), the
store's pruning of idle mailboxes and its folding of the shards, and the upgrade from
version 7 run while the writers already write: every owner's holdings and the totals
(owner '') always equal what counting the rows gives, read in one snapshot during all
of it, and so do each app's short numbers once upgraded; folding leaves every sum as it
was.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson

from pigeonhole.store.errors import Conflict
from pigeonhole.store.postgres import POSTGRES_VERSION, PostgresStore, encode_rows, schema_sql
from pigeonhole.store.postgres.schema import upgrade_file
from pigeonhole.store.postgres.store import RETRY_STATES
from tests.support.postgres import postgres_url, run

__all__ = ["postgres_url"]

#: the owners rows are charged to: '' and None are nobody's (counted in the totals only)
OWNERS = ("192.0.2.1", "192.0.2.2", "2001:db8:1:2::/64", None, "")
NAMES = [str(n) for n in range(1, 9)]
MAILBOXES = [f"m{n}" for n in range(1, 9)]
WRITERS = 4
BATCHES = 60
#: batches each writer sends before the store opens (and upgrades the schema)
BEFORE_UPGRADE = 10
#: a writer connects again (a new backend, so new shards) every this many batches
RECONNECT_EVERY = 9
#: mailboxes whose last touch is before this are pruned (writers' times are 1-1000)
IDLE_BEFORE = 400.0

#: every owner's holdings, and the rows counted per owner and in all, in one snapshot
SNAPSHOT = """
SELECT
  (SELECT coalesce(jsonb_object_agg(owner, jsonb_build_array(n, m, b)), '{}') FROM (
     SELECT owner, sum(nameplates) AS n, sum(mailboxes) AS m, sum(bytes) AS b
     FROM channel.holdings GROUP BY owner) h)::text,
  (SELECT coalesce(jsonb_object_agg(owner, c), '{}') FROM (
     SELECT owner, count(*) AS c FROM channel.nameplates WHERE owner <> '' GROUP BY owner) x)::text,
  (SELECT coalesce(jsonb_object_agg(owner, c), '{}') FROM (
     SELECT owner, count(*) AS c FROM channel.mailboxes WHERE owner <> '' GROUP BY owner) x)::text,
  (SELECT coalesce(jsonb_object_agg(owner, s), '{}') FROM (
     SELECT owner, sum(size) AS s FROM channel.messages WHERE owner <> '' GROUP BY owner) x)::text,
  (SELECT count(*) FROM channel.nameplates),
  (SELECT count(*) FROM channel.mailboxes),
  (SELECT coalesce(sum(size), 0) FROM channel.messages)
"""

Held = dict[str, tuple[int, int, int]]


async def snapshot(conn: Any) -> tuple[Held, Held]:
    """(the holdings summed per owner, what counting the rows gives), owners holding
    nothing left out of both."""
    row = await conn.fetchrow(SNAPSHOT)
    held = {o: (int(n), int(m), int(b)) for o, (n, m, b) in orjson.loads(row[0]).items()}
    nameplates, mailboxes, sizes = (orjson.loads(text) for text in row[1:4])
    counted: Held = {
        o: (int(nameplates.get(o, 0)), int(mailboxes.get(o, 0)), int(sizes.get(o, 0)))
        for o in {*nameplates, *mailboxes, *sizes}
    }
    counted[""] = (int(row[4]), int(row[5]), int(row[6]))
    return _nonzero(held), _nonzero(counted)


#: each app's taken short numbers of each length: the shards of `channel.short_taken`
#: summed, and the rows counted, in one snapshot (apps with none left out of both)
SHORT_SNAPSHOT = """
SELECT
  (SELECT coalesce(jsonb_object_agg(k, t), '{}') FROM (
     SELECT app_id || ':' || length AS k, sum(taken) AS t FROM channel.short_taken
     GROUP BY app_id, length HAVING sum(taken) <> 0) s)::text,
  (SELECT coalesce(jsonb_object_agg(k, c), '{}') FROM (
     SELECT app_id || ':' || length(name) AS k, count(*) AS c FROM channel.nameplates
     WHERE name ~ '^[1-9][0-9]{0,2}$' GROUP BY app_id, length(name)) x)::text
"""


async def short_snapshot(conn: Any) -> tuple[dict[str, int], dict[str, int]]:
    """(the short numbers' counts summed per app and length, what counting gives)."""
    row = await conn.fetchrow(SHORT_SNAPSHOT)
    kept, counted = (orjson.loads(text) for text in row)
    return {k: int(v) for k, v in kept.items()}, {k: int(v) for k, v in counted.items()}


def _nonzero(held: Held) -> Held:
    return {o: v for o, v in held.items() if v != (0, 0, 0)}


@dataclass
class Tally:
    batches: int = 0
    collisions: int = 0
    pruned: int = 0
    folded: int = 0
    checks: int = 0
    short_checks: int = 0
    upgraded: bool = False


def _batch(
    rng: random.Random, app: str, existing: set[str], seqs: list[int], old: list[int]
) -> list[list[Any]]:
    """Random writes to one app: nameplates made only where none is, mailboxes stored
    again (their owner may change), messages new or stored again under a number an
    earlier batch used."""
    rows: list[list[Any]] = []
    reput = rng.choice(old) if old and rng.random() < 0.5 else None
    for _ in range(rng.randint(5, 40)):
        t = round(rng.uniform(1, 1000), 3)
        name, mailbox, owner = rng.choice(NAMES), rng.choice(MAILBOXES), rng.choice(OWNERS)
        kind = rng.choice(("nameplate", "unname", "mailbox", "delete", "message", "touch", "side"))
        if kind == "nameplate" and name not in existing:
            existing.add(name)
            rows.append(["insert_nameplate", app, name, mailbox, owner])
        elif kind == "unname":
            existing.discard(name)
            rows.append(["delete_nameplate", app, name])
        elif kind == "mailbox":
            rows.append(["put_mailbox", app, mailbox, rng.random() < 0.5, t, owner])
        elif kind == "delete":
            rows.append(["delete_mailbox", app, mailbox])
        elif kind == "message":
            seqs[0] += 1
            seq = seqs[0]
            if reput is not None:
                seq, reput = reput, None
            body = rng.choice(("", "hello", "ab" * rng.randint(1, 300)))
            is_text = body == "hello"
            row = [seq, app, mailbox, "s", "p", body, is_text, t, '"id"', owner]
            rows.append(["put_message", *row])
            old.append(seq)
        elif kind == "touch":
            rows.append(["touch", app, mailbox, t])
        else:
            rows.append(["put_mailbox_side", app, mailbox, "s", True, t, None])
    return rows


def _spec(rows: list[list[Any]]) -> str:
    """What a node's batch locks for these writes (the nameplates and mailboxes)."""
    naming = ("insert_nameplate", "delete_nameplate")
    names = {(r[1], r[2]) for r in rows if r[0] in naming}
    boxes = {
        (r[2], r[3]) if r[0] == "put_message" else (r[1], r[2]) for r in rows if r[0] not in naming
    }
    spec = {
        "names": sorted(names),
        "mailboxes": sorted(boxes),
        "apps": [],
        "bodies": [],
        "owners": [],
        "seq": False,
    }
    return orjson.dumps(spec).decode()


async def _writer(url: str, k: int, upgraded: asyncio.Event, tally: Tally) -> None:
    """BATCHES batches to app `k`, each decided as a node does (lock and load, then the
    batch function) in a transaction of its own."""
    rng = random.Random(k)
    app = f"app{k}"
    seqs, old = [(k + 1) * 1_000_000], list[int]()
    conn = await asyncpg.connect(url)
    try:
        for n in range(BATCHES):
            if n == BEFORE_UPGRADE:
                await upgraded.wait()
            if n % RECONNECT_EVERY == RECONNECT_EVERY - 1:
                await conn.close()
                conn = await asyncpg.connect(url)
            names = await conn.fetch("SELECT name FROM channel.nameplates WHERE app_id = $1", app)
            rows = _batch(rng, app, {r[0] for r in names}, seqs, old)
            try:
                async with conn.transaction():
                    await conn.fetchval("SELECT channel.lock_and_load($1::jsonb)", _spec(rows))
                    await conn.execute("SELECT channel.apply_batch($1::jsonb)", encode_rows(rows))
                tally.batches += 1
            except asyncpg.PostgresError as err:
                # only while the upgrade locks the tables: a deadlock, rolled back
                if str(getattr(err, "sqlstate", "")) not in RETRY_STATES:
                    raise
                tally.collisions += 1
    finally:
        await conn.close()


async def _pruner(store: PostgresStore, done: asyncio.Event, tally: Tally) -> None:
    """The leader's pruning, as the node decides it: lock and load the idle mailboxes,
    delete them and the nameplates pointing at them."""
    while not done.is_set():
        idle = await store.idle_mailboxes(IDLE_BEFORE, 20)

        def decide(loaded: dict[str, Any]) -> tuple[int, str]:
            rows = [["delete_nameplate", a, n] for a, n, _, _ in loaded["nameplates"]]
            rows += [["delete_mailbox", a, m] for a, m, *_ in loaded["mailboxes"]]
            return len(loaded["mailboxes"]), encode_rows(rows)

        spec = {"names": [], "mailboxes": sorted(idle), "apps": [], "bodies": []}
        try:
            tally.pruned += await store.decide({**spec, "owners": [], "seq": False}, decide)
        except Conflict:
            tally.collisions += 1
        await asyncio.sleep(0.005)


async def _folder(store: PostgresStore, done: asyncio.Event, tally: Tally) -> None:
    """The store's fold, and folds of a few rows at a time (chunks end mid-owner)."""
    conn = await asyncpg.connect(store.url)
    try:
        while not done.is_set():
            tally.folded += await store.fold_holdings()
            tally.folded += await conn.fetchval("SELECT channel.fold_holdings(3)")
            await asyncio.sleep(0.003)
    finally:
        await conn.close()


async def _checker(url: str, done: asyncio.Event, tally: Tally, wrong: list[Any]) -> None:
    conn = await asyncpg.connect(url)
    try:
        while not done.is_set():
            held, counted = await snapshot(conn)
            if held != counted:
                wrong.append((held, counted))
            if tally.upgraded:  # the short numbers' counts exist from version 10
                kept, names = await short_snapshot(conn)
                if kept != names:
                    wrong.append((kept, names))
                tally.short_checks += 1
            tally.checks += 1
            await asyncio.sleep(0.002)
    finally:
        await conn.close()


def test_holdings_equal_the_rows_through_writers_pruning_folding_and_the_upgrade(
    postgres_url: str,
) -> None:
    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        async with conn.transaction():  # version 7, as nodes of the previous version left it
            await conn.execute(schema_sql("postgres-v1.sql"))
            for version in range(1, 7):
                await conn.execute(schema_sql(upgrade_file(version)))
        tally, wrong = Tally(), list[Any]()
        upgraded, done = asyncio.Event(), asyncio.Event()
        writers = [
            asyncio.create_task(_writer(postgres_url, k, upgraded, tally)) for k in range(WRITERS)
        ]
        while tally.batches < WRITERS * BEFORE_UPGRADE // 2:  # rows written at version 7
            await asyncio.sleep(0.01)
        store = PostgresStore(postgres_url)
        await store.open()  # the upgrade, writers running
        try:
            assert await conn.fetchval("SELECT version FROM channel.version") == POSTGRES_VERSION
            tally.upgraded = True
            upgraded.set()
            others = [
                asyncio.create_task(_pruner(store, done, tally)),
                asyncio.create_task(_folder(store, done, tally)),
                asyncio.create_task(_checker(postgres_url, done, tally, wrong)),
            ]
            await asyncio.gather(*writers)
            done.set()
            await asyncio.gather(*others)
            assert wrong == []
            assert tally.batches >= WRITERS * BATCHES * 0.9 and tally.checks > 10
            assert tally.short_checks > 10
            assert tally.pruned > 0 and tally.folded > 0
            held, counted = await snapshot(conn)
            assert held == counted and set(held) == {"", *OWNERS[:3]}
            # what a batch, a node's tick and its status page read
            assert await store.totals() == counted[""]
            top = sorted(((v[2], o) for o, v in counted.items() if o and v[2]), reverse=True)
            assert await store.top_holders(2) == {o: b for b, o in top[:2]}
            spec = {"names": [], "mailboxes": [], "apps": [], "bodies": [], "seq": False}
            asked = [*OWNERS[:3], "198.51.100.9"]
            loaded = orjson.loads(
                await conn.fetchval(
                    "SELECT channel.lock_and_load($1::jsonb)::text",
                    orjson.dumps({**spec, "owners": asked}).decode(),
                )
            )
            expected = [[o, *counted.get(o, (0, 0, 0))] for o in asked]
            assert sorted(loaded["owners"]) == sorted(expected)
            # folded with nobody writing: one row per owner, none holding nothing
            await store.fold_holdings()
            rows = await conn.fetch("SELECT owner, shard FROM channel.holdings")
            assert sorted(r["owner"] for r in rows) == sorted(held)
            assert {r["shard"] for r in rows} == {0}
            assert await snapshot(conn) == (held, counted)
            kept, names = await short_snapshot(conn)
            assert kept == names
            rows = await conn.fetch("SELECT app_id, length, shard, taken FROM channel.short_taken")
            assert {r["shard"] for r in rows} == {0} and all(r["taken"] > 0 for r in rows)
        finally:
            done.set()
            await store.close()
            await conn.close()

    run(check)


def test_an_upgraded_database_counts_what_it_held(postgres_url: str) -> None:
    """The upgrade fills the holdings from the rows already there; rows of no owner
    count in the totals only; deletes, a changed owner and a TRUNCATE are followed."""

    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute(schema_sql("postgres-v1.sql"))
            for version in range(1, 7):
                await conn.execute(schema_sql(upgrade_file(version)))
            await conn.execute(
                "INSERT INTO channel.nameplates VALUES ('a', '1', 'm1', 'x'),"
                " ('a', '2', 'm2', NULL), ('a', '3', 'm3', 'y'), ('a', '4', 'm4', '');"
                "INSERT INTO channel.mailboxes VALUES ('a', 'm1', true, 1.0, 'x', 1.0),"
                " ('a', 'm2', true, 1.0, 'x', 1.0);"
                "INSERT INTO channel.messages VALUES"
                " (1, 'a', 'm1', 's', 'p', '\\x00', false, 1.0, '1', 'x', 700),"
                " (2, 'a', 'm1', 's', 'p', '\\x00', false, 1.0, '2', NULL, 5)"
            )
            await conn.execute(schema_sql(upgrade_file(7)))
            assert (
                await snapshot(conn) == ({"": (4, 2, 705), "x": (1, 2, 700), "y": (1, 0, 0)},) * 2
            )
            await conn.execute("UPDATE channel.mailboxes SET owner = 'y' WHERE id = 'm2'")
            await conn.execute("DELETE FROM channel.messages WHERE seq = 1")
            await conn.execute("UPDATE channel.mailboxes SET updated = 9.0")  # a touch: no change
            expected = {"": (4, 2, 5), "x": (1, 1, 0), "y": (1, 1, 0)}
            assert await snapshot(conn) == (expected, expected)
            await conn.execute("TRUNCATE channel.nameplates")
            expected = {"": (0, 2, 5), "x": (0, 1, 0), "y": (0, 1, 0)}
            assert await snapshot(conn) == (expected, expected)
        finally:
            await conn.close()

    run(check)


def test_two_nodes_upgrading_at_once_fill_the_holdings_once(postgres_url: str) -> None:
    """The upgrade runs under the schema's advisory lock: the second node to get it finds
    version 8 and backfills nothing again."""

    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        stores = [PostgresStore(postgres_url) for _ in range(2)]
        try:
            await conn.execute(schema_sql("postgres-v1.sql"))
            for version in range(1, 7):
                await conn.execute(schema_sql(upgrade_file(version)))
            await conn.execute(
                "INSERT INTO channel.nameplates SELECT 'a', g::text, 'm' || g, '192.0.2.1'"
                " FROM generate_series(1, 300) g"
            )
            await asyncio.gather(*(store.open() for store in stores))
            expected = {"": (300, 0, 0), "192.0.2.1": (300, 0, 0)}
            assert await snapshot(conn) == (expected, expected)
            assert [await store.totals() for store in stores] == [(300, 0, 0)] * 2
        finally:
            for store in stores:
                await store.close()
            await conn.close()

    run(check)
