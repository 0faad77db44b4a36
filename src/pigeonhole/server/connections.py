"""The open mailbox connections: counted per client address, admitted against the
connection limits, swept for slow readers and pinged when quiet.

Periodic work here does not walk every connection: the slow-reader sweep visits only the
connections whose transport buffer passed BEHIND_BYTES (each registers itself through
`watch` when a write leaves it there), and the bound and subscribed counts of the usage
samples are kept as sessions change (`note`), so reading them costs nothing. Only the
heartbeat visits everyone, once per ping interval: every quiet connection needs its ping;
it visits them in a round spread over the interval, a slice at each tick
(server/turns.py), so pinging a crowd of 15,000 (250 pings a second) is an even trickle,
not a burst every interval that stalls the exchanges in flight.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Protocol

from pigeonhole.protocol.session import Session
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.settings import Settings
from pigeonhole.server.turns import Turn

#: bits of `Member.counted`: what the table counts a connection as
BOUND = 1
SUBSCRIBED = 2


class Member(Protocol):
    """One open connection (server/connection.py) as the table sees it."""

    @property
    def address(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def session(self) -> Session: ...

    #: what the table counts it as (BOUND | SUBSCRIBED), written by the table only
    counted: int

    def deny(self, reason: str) -> bool: ...

    def heartbeat(self) -> None: ...
    def check_behind(self, now: float, timeout: float) -> bool: ...
    async def close(self, code: int, reason: str) -> None: ...


class Connections:
    """The set of open connections and the count per client address."""

    __slots__ = (
        "_behind",
        "_heartbeat_turn",
        "_members",
        "_metrics",
        "_settings",
        "bound",
        "by_address",
        "subscribed",
    )

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._members: set[Member] = set()
        self._heartbeat_turn: Turn[Member] = Turn()
        #: connections a write left with more than BEHIND_BYTES unsent: the sweep's
        #: (a member that is behind is always here; one here may have caught up since)
        self._behind: set[Member] = set()
        #: open connections per client address (read-only outside)
        self.by_address: Counter[str] = Counter()
        #: open connections whose session is bound, and that have a mailbox open
        #: (read-only outside; kept by `note` and `detach`)
        self.bound = 0
        self.subscribed = 0

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[Member]:
        return iter(self._members)

    def __contains__(self, conn: object) -> bool:
        return conn in self._members

    def refusal(self, address: str) -> tuple[int, str, str] | None:
        """(HTTP status, text, limit's kind) when one more from `address` is over a limit."""
        c = self._settings.current
        if len(self._members) >= c.max_connections:
            return 503, "server is at its connection limit\n", "max connections"
        if self.by_address[address] >= c.max_connections_per_address:
            return 429, "too many connections from your address\n", "connections per address"
        return None

    def attach(self, conn: Member) -> None:
        self._members.add(conn)
        self.by_address[conn.address] += 1
        self._metrics.connections_total += 1
        self.note(conn)

    def detach(self, conn: Member) -> None:
        """The connection is gone: it no longer counts against the limits, nor in the
        bound and subscribed counts (whatever its session does from now on)."""
        if conn not in self._members:
            return
        self._members.discard(conn)
        self._behind.discard(conn)
        address = conn.address
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]
        counted = conn.counted
        self.bound -= bool(counted & BOUND)
        self.subscribed -= bool(counted & SUBSCRIBED)
        conn.counted = 0

    def note(self, conn: Member) -> None:
        """Count `conn` as its session is now (called after a step changed it; a
        connection no longer open is not counted again)."""
        if conn not in self._members:
            return
        session = conn.session
        now = (BOUND if session.app_id is not None else 0) | (
            SUBSCRIBED if session.mailbox is not None else 0
        )
        was = conn.counted
        if now != was:
            self.bound += bool(now & BOUND) - bool(was & BOUND)
            self.subscribed += bool(now & SUBSCRIBED) - bool(was & SUBSCRIBED)
            conn.counted = now

    @property
    def watched(self) -> int:
        """How many connections the slow-reader sweep checks now."""
        return len(self._behind)

    def watch(self, conn: Member) -> None:
        """A write left `conn` more than BEHIND_BYTES behind: the sweep checks it until it
        catches up, is dropped or goes. (Taken before `attach` too, for the handshake's
        write; one that writes after it went, its close frame, is let go by the sweep.)"""
        self._behind.add(conn)

    def heartbeat(self) -> None:
        """Ping connections quiet for a sweep; drop those that ignored the last ping."""
        for conn in list(self._members):
            conn.heartbeat()

    def heartbeat_tick(self, now: float, every: float) -> None:
        """`heartbeat` spread over `every` seconds: this tick's share of the round (one
        that went meanwhile is skipped), so each connection is visited once a round."""
        members = self._members
        visit = self._heartbeat_turn.slice(lambda: list(members), members.__contains__, now, every)
        for conn in visit:
            conn.heartbeat()

    def sweep_slow_readers(self, now: float) -> None:
        """Drop clients that have stayed behind (unread bytes) for the send timeout; the
        ones that caught up (or went) are forgotten until a write leaves them behind again."""
        timeout = self._settings.current.send_timeout
        members, behind = self._members, self._behind
        for conn in list(behind):
            if conn not in members or not conn.check_behind(now, timeout):
                behind.discard(conn)
