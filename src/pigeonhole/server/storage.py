"""Where the server's state is stored: the SQLite files in `--data-dir` (the default),
or a PostgreSQL database (`--store postgresql://...`).

Both are the same thing to the server: something that opens and loads the state into the
rendezvous, a `Syncer` the group committer hands each batch to, a body reader for
replays, and a health probe. The protocol's decisions are the same for both (they are
made in protocol/, in memory); what differs is where the rows live, and so how commands
are decided: each store makes its `Decider` (server/deciding.py), the one place the
two ways are told apart.
"""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from pigeonhole.clients import client_key
from pigeonhole.config import ServerConfig
from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.server.core import Core
from pigeonhole.server.deciding import Decider, LocalDecider
from pigeonhole.server.node import Node
from pigeonhole.server.replay import BodyLoader
from pigeonhole.server.transit import WaitingFactory
from pigeonhole.store.errors import StoreError
from pigeonhole.store.group_commit import Done, LocalSyncer, Syncer
from pigeonhole.store.postgres import PostgresStore, encode_batch
from pigeonhole.store.retention import Retention, SqliteUsageWindows, Window, usage_file_bytes
from pigeonhole.store.sqlite import BodyReader, SqliteStore
from pigeonhole.store.sqlite.helper import StoreHelper

#: seconds a thread waiting for the GIL waits before the running one must hand it over
#: (of 5 ms, the default, and 1, 0.5 and 0.2 ms, 1 ms does best: bench/README.md)
GIL_SWITCH_INTERVAL = 0.001


class Storage(Protocol):
    #: shown on the status page
    kind: str
    syncer: Syncer
    bodies: BodyLoader
    #: the SQLite store helper process, when it is the one committing
    helper: StoreHelper | None

    async def open(self, rz: Rendezvous, now: float) -> None:
        """Open (creating or upgrading the schema) and load the live state into `rz`."""

    def decider(self, core: Core, randomness: Randomness) -> Decider:
        """How commands are decided on this store."""

    def transit_waiting(self) -> WaitingFactory | None:
        """The rows through which the relays of nodes sharing this store pair (None:
        one process holds the store, its relay pairs alone)."""

    def helper_starts(self) -> int | None:
        """Store helper processes started (None: no helper commits for this store)."""

    def ping(self) -> None:
        """Raise if the database does not answer (for /health; never waits)."""

    async def usage_bytes(self) -> int:
        """The usage database's size in bytes (for the status page)."""

    async def measure_usage(self) -> None:
        """Measure the usage database's size now (a timer calls it; views read it)."""

    def usage_size(self) -> int | None:
        """The usage database's size as last measured (None: not yet)."""

    async def close(self) -> None: ...


def _retention(config: ServerConfig, window: Window) -> Retention | None:
    """The usage retention task `--usage-retention-days` asks for (None: off)."""
    days = config.usage_retention_days
    return None if days is None else Retention(window, days, config.usage_retention_interval)


class _UsageSize:
    """The usage database's size, measured by a timer (it may need a query) and read by
    the views without waiting."""

    _usage_size: int | None = None

    async def usage_bytes(self) -> int:
        raise NotImplementedError

    async def measure_usage(self) -> None:
        self._usage_size = await self.usage_bytes()

    def usage_size(self) -> int | None:
        return self._usage_size


class SqliteStorage(_UsageSize):
    """channel.sqlite and usage.sqlite in the data directory, written as `--commit-sync`
    says: by the store helper process, or on the loop and synced in a thread or on it."""

    kind = "SQLite"

    def __init__(self, config: ServerConfig) -> None:
        self.store = SqliteStore(config.channel_db, config.usage_db)
        self._usage_db = config.usage_db
        self._usage_windows = SqliteUsageWindows(config.usage_db)
        self.retention = _retention(config, self._usage_windows)
        self._reader = BodyReader(config.channel_db)
        self._read_executor: ThreadPoolExecutor | None = None
        self.bodies = BodyLoader(self._read_bodies)
        self._executor = (
            ThreadPoolExecutor(1, thread_name_prefix="pigeonhole-sync")
            if config.commit_sync == "thread"
            else None
        )
        self._ipv6_prefix = config.ipv6_prefix
        self.helper = (
            StoreHelper(config.channel_db, config.usage_db)
            if config.commit_sync == "process"
            else None
        )
        self.syncer: Syncer = (
            self.helper
            if self.helper is not None
            else LocalSyncer(self.store.write, self.store.sync, self._executor)
        )

    async def open(self, rz: Rendezvous, now: float) -> None:
        if self._executor is not None:
            # the fdatasync worker needs the GIL back the moment its sync returns, and a
            # busy loop thread would hold it for up to the default 5 ms: every reply waits
            sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        self.store.open()
        if self.helper is not None:
            self.helper.open()
        prefix = self._ipv6_prefix
        self.store.load(rz, now, lambda owner: client_key(owner, prefix))
        if self.retention is not None:
            self.retention.start()

    def decider(self, core: Core, randomness: Randomness) -> Decider:
        """In memory, as each command arrives (the rendezvous has its randomness)."""
        return LocalDecider(core)

    async def _read_bodies(self, app_id: str, mailbox_id: str, seqs: list[int]) -> dict[int, str]:
        if self._read_executor is None:
            self._read_executor = ThreadPoolExecutor(1, thread_name_prefix="pigeonhole-bodies")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._read_executor, self._reader.read, app_id, mailbox_id, seqs
        )

    def transit_waiting(self) -> WaitingFactory | None:
        return None

    def helper_starts(self) -> int | None:
        return self.helper.started if self.helper is not None else None

    def ping(self) -> None:
        self.store.ping()

    async def usage_bytes(self) -> int:
        return usage_file_bytes(self._usage_db)

    async def close(self) -> None:
        if self.retention is not None:
            await self.retention.stop()
        self._usage_windows.close()
        if self.helper is not None:
            self.helper.close()
        if self._read_executor is not None:
            self._read_executor.shutdown(wait=True)
            self._read_executor = None
        self._reader.close()
        self.store.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)


class PostgresStorage(_UsageSize):
    """A PostgreSQL database (store/postgres/) shared by any number of nodes: nothing is
    loaded into memory; the node (server/node/) decides in the database."""

    kind = "PostgreSQL"
    helper: StoreHelper | None = None

    def __init__(self, config: ServerConfig, url: str) -> None:
        self.store = PostgresStore(url)
        self.syncer: Syncer = _Writes(self.store)
        self.bodies = BodyLoader(self._read_bodies)
        #: every node deletes old usage rows: a window another node emptied deletes none
        self.retention = _retention(config, self.store.usage_window)

    async def open(self, rz: Rendezvous, now: float) -> None:
        await self.store.open()
        if self.retention is not None:
            self.retention.start()

    def decider(self, core: Core, randomness: Randomness) -> Decider:
        """This process as one node of the server the database holds."""
        return Node(core, self.store, randomness)

    async def _read_bodies(self, app_id: str, mailbox_id: str, seqs: list[int]) -> dict[int, str]:
        """The mailbox's bodies (its index is by mailbox: every one, one query)."""
        rows = await self.store.messages_after(app_id, mailbox_id, 0)
        return {seq: frame["body"] for seq, frame in rows}

    def transit_waiting(self) -> WaitingFactory | None:
        return self.store.waiting_table

    def helper_starts(self) -> None:
        return None

    def ping(self) -> None:
        self.store.ping()

    async def usage_bytes(self) -> int:
        return await self.store.usage_bytes()

    async def close(self) -> None:
        if self.retention is not None:
            await self.retention.stop()
        await self.store.close()


class _Writes:
    """Effects that need no decision (the usage samples), through the group committer:
    a Syncer writing each batch in a transaction of its own."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, effects: list[fx.Effect], done: Done) -> None:
        task = asyncio.get_running_loop().create_task(self._store.write(encode_batch(effects)))
        self._tasks.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            done(StoreError("the write was cancelled") if task.cancelled() else task.exception())

        task.add_done_callback(finished)


def make_storage(config: ServerConfig) -> Storage:
    if config.store is not None:
        return PostgresStorage(config, config.store)
    return SqliteStorage(config)
