"""Transit connections waiting for a partner, shared by every node's relay.

The relay's pairing directory (pigeonhole/transit/peers.py; the server adapts this table
to it) kept in PostgreSQL (`channel.transit_waiting`, schema v5; v6 adds each waiter's
ticket): a relay with no local partner for a handshake either finds a compatible waiter
on another node's relay, or records its own. Both in one transaction under an advisory
lock per token, so two sides arriving at once on two nodes cannot both record themselves
and wait forever. Every query runs on the store's read
pool (asyncpg): the event loop never blocks on it.
"""

from __future__ import annotations

import time
from typing import Any

#: prefix of the per-token advisory lock (the mailbox's locks use 'n' and 'm')
LOCK_PREFIX = "t"

_FIND = (
    "SELECT address, ticket FROM channel.transit_waiting WHERE token = $1 AND address <> $3"
    " AND since >= $4 AND (side IS NULL OR $2::text IS NULL OR side <> $2::text)"
    " ORDER BY id LIMIT 1"
)
_RECORD = (
    "INSERT INTO channel.transit_waiting (token, side, address, since, ticket)"
    " VALUES ($1, $2, $3, $4, $5)"
)
_REMOVE_ONE = (
    "DELETE FROM channel.transit_waiting WHERE id = (SELECT id FROM channel.transit_waiting"
    " WHERE token = $1 AND side IS NOT DISTINCT FROM $2 AND address = $3 LIMIT 1)"
)


class WaitingTable:
    """One node's view of `channel.transit_waiting`: its rows carry its relay's address."""

    def __init__(self, pool: Any, address: str, max_age: float) -> None:
        self._pool = pool
        self.address = address
        #: rows older than this (the lonely timeout) are stale: their client is gone
        self._max_age = max_age

    async def meet(
        self, token: str, side: str | None, ticket: str
    ) -> tuple[str, str | None] | None:
        """A compatible waiter's relay address (HOST:PORT) elsewhere and its ticket, or
        None once this one is recorded with `ticket`."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", LOCK_PREFIX + token
            )
            now = time.time()
            found = await conn.fetchrow(_FIND, token, side, self.address, now - self._max_age)
            if found is not None:
                ticket = found["ticket"]
                return str(found["address"]), None if ticket is None else str(ticket)
            await conn.execute(_RECORD, token, side, self.address, now, ticket)
            return None

    async def left(self, token: str, side: str | None) -> None:
        await self._pool.execute(_REMOVE_ONE, token, side, self.address)

    async def gone(self, address: str) -> None:
        """Every row of the relay at `address`: it no longer answers (or it restarted)."""
        await self._pool.execute("DELETE FROM channel.transit_waiting WHERE address = $1", address)
