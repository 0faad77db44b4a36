"""channel.transit_waiting: relays on two nodes meet through it, never both waiting.

A real PostgreSQL (a fresh database per test) and the store as a node opens it.
"""

from __future__ import annotations

import asyncio
import os

from pigeonhole.store.postgres import PostgresStore
from tests.support.postgres import postgres_url, run

__all__ = ["postgres_url"]

ONE, TWO = "10.0.0.1:4001", "10.0.0.2:4001"
#: each node's tickets for the waiters it records
T1, T2 = "11" * 16, "22" * 16


def token() -> str:
    return os.urandom(32).hex()


def test_sides_arriving_at_once_on_two_nodes_find_each_other(postgres_url: str) -> None:
    async def main() -> list[list[tuple[str, str | None] | None]]:
        store = PostgresStore(postgres_url)
        await store.open()
        try:
            one, two = store.waiting_table(ONE, 300), store.waiting_table(TWO, 300)
            outcomes = []
            for _ in range(20):
                tok = token()
                found = await asyncio.gather(
                    one.meet(tok, "a" * 16, T1), two.meet(tok, "b" * 16, T2)
                )
                outcomes.append(found)
            return outcomes
        finally:
            await store.close()

    # exactly one recorded itself (None), the other was sent to it, with its ticket
    for outcome in run(main):
        assert outcome in ([None, (ONE, T1)], [(TWO, T2), None])


def test_same_sides_own_rows_old_rows_and_removal(postgres_url: str) -> None:
    async def main() -> None:
        store = PostgresStore(postgres_url)
        await store.open()
        try:
            one, two = store.waiting_table(ONE, 300), store.waiting_table(TWO, 300)
            stale = store.waiting_table(TWO, -1)  # sees every row as too old
            tok, side = token(), "a" * 16
            assert await one.meet(tok, side, T1) is None
            assert await two.meet(tok, side, T2) is None  # the same side never pairs
            # its own rows are not offered; the other's comes with its ticket
            assert await one.meet(tok, "b" * 16, T1) == (TWO, T2)
            assert await stale.meet(tok, None, T2) is None
            await two.left(tok, side)
            await two.left(tok, None)
            assert await one.meet(tok, None, T1) is None  # TWO's rows are all gone
            await one.gone(ONE)
            assert await two.meet(tok, "c" * 16, T2) is None
            await two.gone(TWO)
            assert await one.meet(tok, "d" * 16, T1) is None
        finally:
            await store.close()

    run(main)


def test_a_row_of_a_version_5_node_has_no_ticket(postgres_url: str) -> None:
    """A node of schema v5, still running during a rolling upgrade, records no ticket:
    it is found without one (and the finder then sends the plain line)."""

    async def main() -> None:
        store = PostgresStore(postgres_url)
        await store.open()
        try:
            tok = token()
            async with store.waiting_table(ONE, 300)._pool.acquire() as conn:
                await conn.execute(
                    "INSERT INTO channel.transit_waiting (token, side, address, since)"
                    " VALUES ($1, $2, $3, extract(epoch from now()))",
                    tok,
                    "a" * 16,
                    ONE,
                )
            assert await store.waiting_table(TWO, 300).meet(tok, "b" * 16, T2) == (ONE, None)
        finally:
            await store.close()

    run(main)
