"""What a node uses of the server it runs in (app.py's MailboxServer satisfies it)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol

from pigeonhole.config import ServerConfig
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.ledger import Ledger


class NodeHost(Protocol):
    @property
    def config(self) -> ServerConfig: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def rendezvous(self) -> Rendezvous:
        """Where this node's share of the status page's exchange counts goes."""

    @property
    def ledger(self) -> Ledger:
        """The quotas' figures the views read (the database's totals, refreshed)."""

    @property
    def connections(self) -> Collection[Any]: ...
    @property
    def started_at(self) -> float: ...

    def storage_failed(self, err: BaseException) -> None: ...
    def storage_recovered(self) -> None: ...
    def observe_commit(self, seconds: float) -> None: ...
