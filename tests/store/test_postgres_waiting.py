"""channel.transit_waiting: relays on two nodes meet through it, never both waiting.

A real PostgreSQL (a fresh database per test) and the store as a node opens it.
"""

from __future__ import annotations

import asyncio
import os

from pigeonhole.store.postgres import PostgresStore
from postgres_support import postgres_url, run

__all__ = ["postgres_url"]

ONE, TWO = "10.0.0.1:4001", "10.0.0.2:4001"


def token() -> str:
    return os.urandom(32).hex()


def test_sides_arriving_at_once_on_two_nodes_find_each_other(postgres_url: str) -> None:
    async def main() -> list[list[str | None]]:
        store = PostgresStore(postgres_url)
        await store.open()
        try:
            one, two = store.waiting_table(ONE, 300), store.waiting_table(TWO, 300)
            outcomes = []
            for _ in range(20):
                tok = token()
                found = await asyncio.gather(one.meet(tok, "a" * 16), two.meet(tok, "b" * 16))
                outcomes.append(found)
            return outcomes
        finally:
            await store.close()

    # exactly one recorded itself (None), the other was sent to it
    for outcome in run(main):
        assert outcome in ([None, ONE], [TWO, None])


def test_same_sides_own_rows_old_rows_and_removal(postgres_url: str) -> None:
    async def main() -> None:
        store = PostgresStore(postgres_url)
        await store.open()
        try:
            one, two = store.waiting_table(ONE, 300), store.waiting_table(TWO, 300)
            stale = store.waiting_table(TWO, -1)  # sees every row as too old
            tok, side = token(), "a" * 16
            assert await one.meet(tok, side) is None
            assert await two.meet(tok, side) is None  # the same side never pairs
            assert await one.meet(tok, "b" * 16) == TWO  # its own rows are not offered
            assert await stale.meet(tok, None) is None
            await two.left(tok, side)
            await two.left(tok, None)
            assert await one.meet(tok, None) is None  # TWO's rows are all gone
            await one.gone(ONE)
            assert await two.meet(tok, "c" * 16) is None
            await two.gone(TWO)
            assert await one.meet(tok, "d" * 16) is None
        finally:
            await store.close()

    run(main)
