"""`channel.short_names` on the real PostgreSQL, beside a crowd of 15,000 nameplates: what
an `allocate` reads instead of every name of its app (schema version 7), the taken counts
it reads, kept by triggers (version 10), and the free numbers it draws instead of listing
a length (version 11)."""

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


def _allocated(loaded: dict[str, Any], seed: int, count: int) -> list[str]:
    """The names `count` allocations in APP take, decided as a node decides them on what
    `loaded` holds, with the node's chance seeded by `seed`."""
    rng = random.Random(seed)
    ids = (f"m{n}" for n in range(10))
    chance = Randomness(rng.choice, rng.randrange, ids.__next__)
    rz = loaded_rendezvous(loaded, 1.0, chance, blur_time=None, limits=Limits(), stored_bytes=0)
    return [rz.allocate(APP, f"side{i}", 1.0, []) for i in range(count)]


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
        # 100-999 is mostly free: one free number drawn for the third allocation
        assert more[1][:2] == [3, "free"] and len(more[1][2]) == 1
        (drawn,) = more[1][2]
        assert 400 <= drawn <= 999
        assert len(more) == 2
        for seed in range(20):
            assert _allocated(loaded, seed, 3) == ["9", "99", str(drawn)]

    run(check)


async def _kept(conn: Any) -> dict[tuple[str, int], int]:
    """`channel.short_taken` summed over its shards, per app and length (zeros left out)."""
    rows = await conn.fetch(
        "SELECT app_id, length, sum(taken) FROM channel.short_taken GROUP BY 1, 2"
    )
    return {(r[0], r[1]): int(r[2]) for r in rows if r[2]}


def test_the_taken_counts_follow_every_writer(postgres_url: str) -> None:
    """The upgrade to version 10 counts the short numbers a version-9 database holds (1-999
    exactly as written, per app); then the triggers follow inserts on two connections
    (two shards), a rename, deletes, the leader's fold and a TRUNCATE, and the allocation
    answers from those counts."""

    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        other = await asyncpg.connect(postgres_url)
        try:
            to_v10 = SCHEMA.index(upgrade_file(9))
            for name in SCHEMA[:to_v10]:  # version 9
                await conn.execute(schema_sql(name))
            await _put(conn, [str(n) for n in range(1, 21)] + ["07", "0", "1000", "0123"])
            await _put(conn, ["5", "55", "555"], app="b")
            for name in SCHEMA[to_v10:]:
                await conn.execute(schema_sql(name))
            assert await _kept(conn) == {(APP, 1): 9, (APP, 2): 11, ("b", 1): 1, ("b", 2): 1,
                                         ("b", 3): 1}  # fmt: skip
            await _put(other, ["21", "1001", "998"])
            await other.execute(
                "UPDATE channel.nameplates SET name = '0' || name"
                " WHERE app_id = 'b' AND name = '55'"
            )
            await conn.execute(
                "UPDATE channel.nameplates SET name = '56' WHERE app_id = 'b' AND name = '555'"
            )
            await _drop(conn, ["1", "2", "3", "1000"])
            expected = {(APP, 1): 6, (APP, 2): 12, (APP, 3): 1, ("b", 1): 1, ("b", 2): 1}
            assert await _kept(conn) == expected
            shards = await conn.fetchval("SELECT count(DISTINCT shard) FROM channel.short_taken")
            assert shards == 3  # the upgrade's (0) and each connection's
            mine = next(a for a in await _allocates(conn, []) if a[0] == APP)
            assert mine[1:5] == [[6, 12, 1], 1, "free", [1, 2, 3]]
            # folded: one row per app and length, none holding nothing
            await conn.execute("DELETE FROM channel.nameplates WHERE app_id = 'b' AND name = '56'")
            # each connection's shard rows: (app, 1), (b, 2), (b, 3); (app, 2), (app, 3), (b, 2)
            assert await conn.fetchval("SELECT channel.fold_holdings(100)") == 6
            rows = await conn.fetch("SELECT app_id, length, shard, taken FROM channel.short_taken")
            assert sorted((r[0], r[1], r[2], r[3]) for r in rows) == sorted(
                [(APP, 1, 0, 6), (APP, 2, 0, 12), (APP, 3, 0, 1), ("b", 1, 0, 1)]
            )
            await conn.execute("TRUNCATE channel.nameplates")
            assert await _kept(conn) == {}
            mine = next(a for a in await _allocates(conn, []) if a[0] == APP)
            assert mine[1:4] == [[0, 0, 0], 1, "taken"]
        finally:
            await other.close()
            await conn.close()

    run(check)


async def _sample(conn: Any, wanted: int) -> list[Any]:
    """The answer of `channel.short_names` (version 11's, with `wanted`) for APP."""
    answer: list[Any] = orjson.loads(
        await conn.fetchval("SELECT channel.short_names($1, '{}'::text[], $2)::text", APP, wanted)
    )
    return answer


def test_the_drawn_free_numbers_are_a_uniform_sample(postgres_url: str) -> None:
    """Beside 1-99 and 700 of 100-999 taken, each answer holds `wanted` distinct free
    three-digit numbers; over 400 answers every free number comes about equally often
    (PostgreSQL's generator seeded, so the counts are the same each run: a sampler that
    favoured the low numbers, or the first free ones, fails the chi-square bound); where
    drawing would cost more than listing (3 free of 900), the length is listed whole; a
    batch that wants more than a length holds gets all of it and the next length's draw,
    or its listing where that is cheaper."""

    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        try:
            async with conn.transaction():
                await _schema(conn)
            rng = random.Random(11)
            three = rng.sample(range(100, 1000), 700)
            await _put(conn, [str(n) for n in range(1, 100)] + [str(n) for n in three])
            free = sorted(set(range(100, 1000)) - set(three))
            await conn.execute("SELECT setseed(0.25)")
            seen = dict.fromkeys(free, 0)
            for _ in range(400):
                answer = await _sample(conn, 5)
                assert answer[1:4] == [[9, 90, 700], 3, "free"]
                drawn = answer[4]
                assert len(drawn) == 5 == len(set(drawn)) and drawn == sorted(drawn)
                for n in drawn:
                    seen[n] += 1  # a taken number is no key: KeyError
            expected = 400 * 5 / len(free)  # 10 each
            chi2 = sum((c - expected) ** 2 / expected for c in seen.values())
            # 199 degrees of freedom: 99.9% of uniform samples stay below 267
            assert min(seen.values()) > 0 and chi2 < 267, (chi2, sorted(seen.items()))
            low_half = sum(c for n, c in seen.items() if n < 550)
            assert abs(low_half - 2000 * sum(n < 550 for n in free) / len(free)) < 150
            # a batch of five allocations takes the five drawn numbers, each once (the
            # node keeps the list sorted as it takes from it: an unsorted one made it
            # take a number twice, and then a taken one)
            loaded = await _load(conn, [APP], [], wanted={APP: 5})
            (answer,) = loaded["allocates"]
            for seed in range(10):
                made = _allocated(loaded, seed, 5)
                assert sorted(int(n) for n in made) == sorted(answer[4])
            # nearly full: listed whole, in order
            await _put(conn, [str(n) for n in free[3:]])
            answer = await _sample(conn, 1)
            assert answer[1:5] == [[9, 90, 897], 3, "free", free[:3]]
            # one digit mostly free, few taken: its taken names (listing is cheaper)
            await _drop(conn, [str(n) for n in range(2, 10)])
            answer = await _sample(conn, 1)
            assert answer[1:5] == [[1, 90, 897], 1, "taken", ["1"]]
            # one digit with one free number, two digits half free, a batch wanting two:
            # the one listed, then one even two-digit number drawn
            await _drop(conn, [str(n) for n in range(10, 100, 2)])
            await _put(conn, [str(n) for n in range(3, 10)])
            for _ in range(20):
                answer = await _sample(conn, 2)
                assert answer[1:5] == [[8, 45, 897], 1, "free", [2]]
                ((length, kind, (even,)),) = answer[6]
                assert (length, kind) == (2, "free") and even % 2 == 0 and 10 <= even <= 98
            # a batch wanting 50: the two digits' 45 free numbers are cheaper listed (as
            # their taken names), and three digits' three too
            await _put(conn, ["2"])
            answer = await _sample(conn, 50)
            assert answer[1:4] == [[9, 45, 897], 2, "taken"]
            assert sorted(answer[4], key=int) == [str(n) for n in range(11, 100, 2)]
            assert answer[6] == [[3, "free", free[:3]]]
        finally:
            await conn.close()

    run(check)
