"""How commands are decided: the one seam between the server and its store's way of deciding.

On SQLite (the default) this process holds the state in memory: a command is decided the
moment it arrives and its writes join the next group commit (`LocalDecider`). On
PostgreSQL the database holds it, shared by any number of processes: commands queue and
are decided in batches inside transactions (server/node/). The connection, the server, the
status page and the metrics call only `Decider`, so a feature touching commands is written
once; which decider runs is chosen once, with the store (server/storage.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.session import Session, Step
from pigeonhole.server.core import Core
from pigeonhole.server.outbox import Barrier

#: (connections, bound, subscribed, nameplates, mailboxes): one usage sample's counts
UsageCounts = tuple[int, int, int, int, int]
#: (name, Prometheus type, value): a decider's own figures for /metrics
Figure = tuple[str, str, int]


class Member(Protocol):
    """A connection as a decider sees it (server/connection.py)."""

    @property
    def session(self) -> Session: ...
    @property
    def address(self) -> str: ...

    def emit(self, msg: dict[str, Any], step: Step, barrier: Barrier) -> None:
        """Send what a step decided; replies that wait for its writes wait for `barrier`.
        Called after every step, so the connection counts its session anew here."""

    def emit_run(self, decided: list[tuple[dict[str, Any], Step]]) -> None:
        """Send what a committed batch decided for this connection's commands, in order
        (after its fork became the session, which the connection counts anew here)."""

    def deliver(self, frame: dict[str, Any]) -> None:
        """Another side's message, committed elsewhere."""

    def flooded(self, msg: dict[str, Any]) -> None:
        """More commands queued than the decider takes: refuse and close."""


class Decider(Protocol):
    """What the server, its connections and its views ask of the way commands are decided."""

    async def start(self) -> None:
        """Begin deciding (after the store is open, before the server listens)."""

    async def stop(self) -> None:
        """Stop deciding (after the connections are closed, before the store is)."""

    def submit(self, conn: Member, msg: dict[str, Any], frame: str | bytes) -> None:
        """Decide a decoded command (`frame`: as received); its replies go to `conn`."""

    def forget(self, conn: Member) -> bool:
        """The connection is gone: it leaves its mailbox and reads nothing more. True when
        nothing of it is left to decide (its session is then never used again)."""

    def alive(self) -> tuple[int, int]:
        """(nameplates, mailboxes) alive on the whole server."""

    async def prune(self) -> int:
        """Prune idle channels here (0 when another process does it); mailboxes pruned."""

    async def usage_counts(self, now: float) -> UsageCounts | None:
        """The counts of a usage sample; None when another process writes the samples."""

    def status(self) -> dict[str, Any] | None:
        """The status page's figures of this decider (None: it has none of its own)."""

    def figures(self) -> list[Figure]:
        """Its counters and gauges for /metrics."""


class LocalDecider:
    """The state in this process's memory (SQLite): each command is decided as it arrives,
    its writes go to the group committer, and its replies wait for that commit."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._clock = core.clock
        self._committer = core.committer

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def submit(self, conn: Member, msg: dict[str, Any], frame: str | bytes) -> None:
        step = conn.session.receive(msg, self._clock())
        conn.emit(msg, step, self._committer.submit(step.effects))

    def forget(self, conn: Member) -> bool:
        conn.session.disconnect()
        return True

    def alive(self) -> tuple[int, int]:
        return self._core.rendezvous.counts()

    async def prune(self) -> int:
        """Prune idle channels and wait until the deletions are committed."""
        effects: list[fx.Effect] = []
        core = self._core
        pruned = core.rendezvous.prune(self._clock(), core.config.prune_expiry, effects)
        barrier = self._committer.submit(effects)
        if barrier is not None:
            await barrier
        return pruned

    async def usage_counts(self, now: float) -> UsageCounts:
        """The connection table keeps its bound and subscribed counts as steps are
        emitted (server/connections.py `note`): read, not recounted."""
        conns = self._core.clients
        return (len(conns), conns.bound, conns.subscribed, *self._core.rendezvous.counts())

    def status(self) -> None:
        return None

    def figures(self) -> list[Figure]:
        return []
