"""The open mailbox connections: counted per client address, admitted against the
connection limits, swept for slow readers and pinged when quiet."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Protocol

from pigeonhole.protocol.session import Session
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.settings import Settings


class Member(Protocol):
    """One open connection (server/connection.py) as the table sees it."""

    @property
    def address(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def session(self) -> Session: ...

    def deny(self, reason: str) -> bool: ...

    def heartbeat(self) -> None: ...
    def check_behind(self, now: float, timeout: float) -> None: ...
    async def close(self, code: int, reason: str) -> None: ...


class Connections:
    """The set of open connections and the count per client address."""

    __slots__ = ("_members", "_metrics", "_settings", "by_address")

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._members: set[Member] = set()
        #: open connections per client address (read-only outside)
        self.by_address: Counter[str] = Counter()

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

    def detach(self, conn: Member) -> None:
        """The connection is gone: it no longer counts against the limits."""
        if conn not in self._members:
            return
        self._members.discard(conn)
        address = conn.address
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]

    def heartbeat(self) -> None:
        """Ping connections quiet for a sweep; drop those that ignored the last ping."""
        for conn in list(self._members):
            conn.heartbeat()

    def sweep_slow_readers(self, now: float) -> None:
        """Drop clients that have stayed behind (unread bytes) for the send timeout."""
        timeout = self._settings.current.send_timeout
        for conn in list(self._members):
            conn.check_behind(now, timeout)
