"""`channel.short_names` on the real PostgreSQL, beside a crowd of 15,000 nameplates: what
an `allocate` reads instead of every name of its app (schema version 7)."""

from __future__ import annotations

import random
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson

from pigeonhole.protocol.channels import Randomness
from pigeonhole.protocol.limits import Limits
from pigeonhole.store.postgres import POSTGRES_VERSION, schema_sql
from pigeonhole.store.postgres.schema import upgrade_file
from pigeonhole.store.postgres.shared import loaded_rendezvous
from tests.support.postgres import postgres_url, run

__all__ = ["postgres_url"]

APP = "lothar.com/wormhole/text-or-file-xfer"
SCHEMA = ["postgres-v1.sql"] + [upgrade_file(v) for v in range(1, POSTGRES_VERSION)]


async def _load(conn: Any, apps: list[str], long: list[str], **more: Any) -> dict[str, Any]:
    """`channel.lock_and_load` for a batch that allocates in `apps` and reads nothing else."""
    spec = {
        "names": [],
        "mailboxes": [],
        "apps": [],
        "bodies": [],
        "owners": [],
        "seq": False,
        "allocates": apps,
        "long": [[APP, name] for name in long],
        **more,
    }
    loaded: dict[str, Any] = orjson.loads(
        await conn.fetchval(
            "SELECT channel.lock_and_load($1::jsonb)::text", orjson.dumps(spec).decode()
        )
    )
    assert loaded["app_names"] == []  # no name is read for an allocation
    return loaded


async def _allocates(conn: Any, long: list[str]) -> list[Any]:
    return sorted((await _load(conn, [APP, "other app"], long))["allocates"])


async def _schema(conn: Any) -> None:
    """Every schema file in order, as a new database gets them."""
    for name in SCHEMA:
        await conn.execute(schema_sql(name))


async def _put(conn: Any, names: list[str], app: str = APP) -> None:
    await conn.executemany(
        "INSERT INTO channel.nameplates (app_id, name, mailbox_id) VALUES ($1, $2, $3)",
        [(app, name, f"mb{name}") for name in names],
    )


async def _drop(conn: Any, names: list[str]) -> None:
    await conn.execute(
        "DELETE FROM channel.nameplates WHERE app_id = $1 AND name = ANY($2::text[])", APP, names
    )


def test_short_names_beside_a_crowd(postgres_url: str) -> None:
    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        try:
            async with conn.transaction():
                await _schema(conn)
            long = [str(n) for n in range(1000, 15_001)]
            await _put(conn, [str(n) for n in range(1, 1000)] + long)
            await _put(conn, ["07", "0", "0123"])  # other shapes: they take no short number
            await _put(conn, ["3"], app="another app")
            # 1-999 all taken: the drawn long numbers that are free, in their order
            drawn = ["999999", "1000", "20000", "15000", "123456"]
            mine, other = await _allocates(conn, drawn)
            assert mine == [APP, [9, 90, 900], 0, "", [], ["999999", "20000", "123456"]]
            assert other == ["other app", [0, 0, 0], 1, "taken", [], []]
            # three digits mostly taken: its free numbers
            await _drop(conn, ["512", "100", "999"])
            mine, _ = await _allocates(conn, drawn)
            assert mine == [APP, [9, 90, 897], 3, "free", [100, 512, 999], []]
            # two digits mostly free: its taken names
            await _drop(conn, [str(n) for n in range(10, 60)])
            mine, _ = await _allocates(conn, drawn)
            assert mine[:4] == [APP, [9, 40, 897], 2, "taken"]
            assert sorted(mine[4], key=int) == [str(n) for n in range(60, 100)]
            # one digit free: the shortest wins
            await _drop(conn, ["7"])
            mine, _ = await _allocates(conn, drawn)
            assert mine[:4] == [APP, [8, 40, 897], 1, "free"] and mine[4] == [7]
        finally:
            await conn.close()

    run(check)


def test_a_batch_goes_on_past_the_shortest_length_knowing_its_names(postgres_url: str) -> None:
    """Three `allocate`s in one batch where 1-9 has one free number and 10-99 one: the
    answer reads 10-99 and 100-999 too (`wanted` 3), so the batch takes 9, 99 and a free
    three-digit number, never a name it did not read (a taken name drawn there made the
    batch collide on the unique key, and again each time it was decided again)."""

    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        try:
            async with conn.transaction():
                await _schema(conn)
                taken = [str(n) for n in range(1, 9)] + [str(n) for n in range(10, 99)]
                taken += [str(n) for n in range(100, 400)]
                await _put(conn, taken)
                loaded = await _load(conn, [APP], [], wanted={APP: 3})
        finally:
            await conn.close()
        (answer,) = loaded["allocates"]
        assert answer[:5] == [APP, [8, 89, 300], 1, "free", [9]]
        more = answer[6]
        assert more[0] == [2, "free", [99]]
        assert more[1][:2] == [3, "taken"] and sorted(more[1][2], key=int) == taken[97:]
        assert len(more) == 2
        for seed in range(20):
            rng = random.Random(seed)
            ids = (f"m{n}" for n in range(10))
            chance = Randomness(rng.choice, rng.randrange, ids.__next__)
            rz = loaded_rendezvous(
                loaded, 1.0, chance, blur_time=None, limits=Limits(), stored_bytes=0
            )
            made = [rz.allocate(APP, f"side{i}", 1.0, []) for i in range(3)]
            assert made[:2] == ["9", "99"]
            assert 400 <= int(made[2]) <= 999

    run(check)
