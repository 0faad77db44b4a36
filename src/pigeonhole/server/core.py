"""The context's core: what every part, the decider included, may use.

Built first, in dependency order, by server/wiring.py; the decider is made from it by the
store (server/storage.py), and the full context (server/context.py) adds the decider, the
store, the relay and the archive. See server/context.py for the whole picture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pigeonhole.config import ServerConfig
from pigeonhole.permissions.policy import PermissionPolicy
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.ledger import Ledger
from pigeonhole.server.addresses import ClientResolver
from pigeonhole.server.connections import Connections
from pigeonhole.server.events import Events, Tasks
from pigeonhole.server.health import StorageHealth
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.settings import Settings, Uptime
from pigeonhole.store.group_commit import GroupCommitter

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Core:
    settings: Settings
    clock: Clock
    metrics: Metrics
    events: Events
    tasks: Tasks
    permissions: PermissionPolicy
    rendezvous: Rendezvous
    health: StorageHealth
    committer: GroupCommitter
    clients: Connections
    #: who a connection is (trusted proxies) and what counts as one client
    addresses: ClientResolver
    uptime: Uptime

    @property
    def config(self) -> ServerConfig:
        """The settings in force now."""
        return self.settings.current

    @property
    def ledger(self) -> Ledger:
        """Quotas per client address, and the storage state that refuses new data."""
        return self.rendezvous.ledger
