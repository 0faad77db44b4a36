"""What the server's parts need of the server, as protocols: no module imports app.py back.

`MailboxServer` (app.py) builds connections, the metrics text, the status page and the
admin app; each of those is written against the narrow view below instead of the class,
so the import graph of `server/` has no cycle (tests/server/test_import_graph.py) and a
part can be driven by something else in a test. The server satisfies them structurally.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Protocol

from aiohttp import web

from pigeonhole.config import ServerConfig
from pigeonhole.permissions.policy import PermissionPolicy
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.ledger import Ledger
from pigeonhole.server.bad_input import BadInput
from pigeonhole.server.deciding import Decider
from pigeonhole.server.disk import DiskWatch
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.replay import BodyLoader
from pigeonhole.server.storage import Storage
from pigeonhole.server.transit import TransitService
from pigeonhole.store.group_commit import GroupCommitter
from pigeonhole.store.sqlite.helper import StoreHelper


class Peer(Protocol):
    """A client connection as the server's log sees it."""

    @property
    def address(self) -> str: ...


class ServerCore(Protocol):
    """What every part reads of the server: its settings, clock, counters and state."""

    @property
    def config(self) -> ServerConfig: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def bad_input(self) -> BadInput: ...
    @property
    def permissions(self) -> PermissionPolicy: ...
    @property
    def rendezvous(self) -> Rendezvous: ...
    @property
    def committer(self) -> GroupCommitter: ...
    @property
    def bodies(self) -> BodyLoader: ...

    @property
    def decider(self) -> Decider:
        """How commands are decided: in memory (SQLite), or as a node of a shared store."""

    def alive(self) -> tuple[int, int]:
        """(nameplates, mailboxes) alive."""


class ConnectionHost(ServerCore, Protocol):
    """What one connection (connection.py) uses of the server."""

    def welcome(
        self, host: str, port: int | None, permission_required: dict[str, object]
    ) -> dict[str, object]: ...
    def detach(self, conn: Any) -> None: ...
    def event(
        self, what: str, conn: Peer | None, kind: str | None = None, **fields: object
    ) -> None: ...
    def refused(self, explain: str, conn: Peer) -> None: ...
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None: ...


class ServerView(ServerCore, Protocol):
    """What the operators' views (exposition.py, status.py, admin.py) read of the server."""

    @property
    def ledger(self) -> Ledger: ...
    @property
    def disk(self) -> DiskWatch: ...
    @property
    def storage(self) -> Storage: ...
    @property
    def helper(self) -> StoreHelper | None: ...
    @property
    def connections(self) -> Collection[Any]: ...
    @property
    def connections_by_address(self) -> Counter[str]: ...
    @property
    def started_at(self) -> float: ...
    @property
    def app(self) -> web.Application: ...
    @property
    def transit(self) -> TransitService | None: ...

    def health_problem(self) -> str | None: ...
