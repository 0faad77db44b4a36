"""What the server's parts share, built once in dependency order and passed in.

As uvicorn passes its `Config` and a small `ServerState`, the server passes one
`ServerContext`, which server/wiring.py builds in this order:

1. the settings (`settings.current`, replaced whole by a reload) and the clock;
2. the counters (`metrics`), the event log with its summaries and bad-input counts
   (`events`), the background tasks (`tasks`);
3. the permission policy and the rendezvous (the protocol's state, with the quotas'
   ledger);
4. the store (`storage`), its health (failing commits, the disk), the group committer
   that writes to it, and the table of open connections (`clients`): with the above,
   the core (server/core.py);
5. from the core: the decider (the store makes it: in memory on SQLite, a node on
   PostgreSQL), the transit relay and the archive.

Every part takes the context, or the core, in its constructor: connections, the decider,
the status page, `/metrics`, the routes. No part holds the server object (app.py), which
only listens, accepts, and runs the timers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from pigeonhole.archive.endpoint import ArchiveService
from pigeonhole.server.core import Core
from pigeonhole.server.deciding import Decider
from pigeonhole.server.storage import Storage
from pigeonhole.server.transit import TransitService


@dataclass(frozen=True, slots=True)
class ServerContext(Core):
    """The core, and what is built from it (`transit`, `archive`: None when off)."""

    storage: Storage = field(kw_only=True)
    decider: Decider = field(kw_only=True)
    transit: TransitService | None = field(kw_only=True)
    archive: ArchiveService | None = field(kw_only=True)

    @classmethod
    def of(
        cls,
        core: Core,
        storage: Storage,
        decider: Decider,
        transit: TransitService | None,
        archive: ArchiveService | None,
    ) -> ServerContext:
        parts = {f.name: getattr(core, f.name) for f in fields(Core)}
        return cls(**parts, storage=storage, decider=decider, transit=transit, archive=archive)
