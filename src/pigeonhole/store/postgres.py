"""The PostgreSQL store (`serve --store postgresql://...`): the SQLite store's job on a server.

The same effects become the same rows (store/schema/postgres-v1.sql), a batch is one
transaction, and its commit (`synchronous_commit` on: the WAL is flushed) is what a
reply waits for, as the SQLite store's fdatasync is. PostgreSQL already commits many
sessions per flush, so there is no separate sync step. A batch is one call of the
schema's `channel.apply_batch` with the effects as one JSON array: one round trip and
one transaction however many rows it holds (at 100 exchanges in flight, 1,361
exchanges/s against 544 with a round trip per run of rows: bench/README.md).

One node serves a database: the node holds a session advisory lock for as long as it
runs, and a second node on the same database is refused at start with a clear message.
Several nodes sharing one database (issue 16) need the protocol's decisions taken in
the database, which this store does not do yet.

Connections (asyncpg): one writes the batches, one holds the node's lock, and a small
pool serves the start-up load, replayed bodies and the health probe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from importlib import resources
from typing import Any

import orjson

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.store import loading as L
from pigeonhole.store.group_commit import Done
from pigeonhole.store.loading import StoredRows, load_state
from pigeonhole.store.sqlite import StoreError, kept_as_text

POSTGRES_VERSION = 1
#: advisory lock keys: creating the schema (per transaction), and the serving node
SCHEMA_LOCK = 0x50_69_67_01
NODE_LOCK = 0x50_69_67_02
#: seconds between health probes (`/health` reports the last one)
PING_INTERVAL = 2.0


def _asyncpg() -> Any:
    try:
        import asyncpg  # type: ignore[import-untyped, unused-ignore]
    except ImportError as err:  # an optional dependency: `pip install pigeonhole[postgres]`
        raise StoreError(
            "the PostgreSQL store needs asyncpg: pip install -e '.[postgres]'"
        ) from err
    return asyncpg


def schema_sql() -> str:
    path = resources.files("pigeonhole.store") / "schema" / f"postgres-v{POSTGRES_VERSION}.sql"
    return path.read_text()


class PostgresStore:
    def __init__(self, url: str) -> None:
        self.url = url
        #: the asyncpg module, imported when the store opens (an optional dependency)
        self._pg: Any = None
        self._writer: Any = None
        self._lock: Any = None
        self._pool: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ping_task: asyncio.Task[None] | None = None
        #: why the last health probe failed (None: it answered)
        self.ping_error: str | None = None

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, create or check the schema, and take the node's lock (else refuse)."""
        pg = self._pg = _asyncpg()
        try:
            self._writer = await pg.connect(self.url)
            await self._create_or_check()
            self._lock = await pg.connect(self.url)
            if not await self._lock.fetchval("SELECT pg_try_advisory_lock($1)", NODE_LOCK):
                raise StoreError(
                    "another Pigeonhole node is serving this database; one node per"
                    " database (several nodes sharing one are not supported yet)"
                )
            self._pool = await pg.create_pool(self.url, min_size=1, max_size=4)
        except (OSError, pg.PostgresError) as err:
            await self.close()
            raise StoreError(f"cannot open the PostgreSQL store: {err}") from err
        except BaseException:
            await self.close()
            raise
        self._ping_task = asyncio.get_running_loop().create_task(self._probe())

    async def _create_or_check(self) -> None:
        async with self._writer.transaction():
            await self._writer.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
            exists = await self._writer.fetchval(
                "SELECT to_regclass('channel.version') IS NOT NULL"
            )
            if not exists:
                await self._writer.execute(schema_sql())
                return
            version = await self._writer.fetchval("SELECT max(version) FROM channel.version")
            if version != POSTGRES_VERSION:
                raise StoreError(
                    f"unable to handle PostgreSQL schema version {version}"
                    f" (want {POSTGRES_VERSION})"
                )

    async def close(self) -> None:
        if self._ping_task is not None:
            self._ping_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ping_task
            self._ping_task = None
        for task in list(self._tasks):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        for name in ("_lock", "_writer"):
            conn = getattr(self, name)
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
                setattr(self, name, None)

    # -- reads ----------------------------------------------------------------------

    async def load(self, rz: Rendezvous, now: float) -> None:
        """Rebuild the in-memory state (store/loading.py); bodies stay in the database."""
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            rows = StoredRows(
                mailboxes=await conn.fetch(f"SELECT {L.MAILBOX_COLUMNS} FROM channel.mailboxes"),
                mailbox_sides=await conn.fetch(
                    f"SELECT {L.MAILBOX_SIDE_COLUMNS} FROM channel.mailbox_sides"
                ),
                messages=await conn.fetch(
                    f"SELECT {L.MESSAGE_COLUMNS_BEFORE_SIZE},"
                    " CASE WHEN body_is_text THEN length(body) / 2 ELSE length(body) END,"
                    f" {L.MESSAGE_COLUMNS_AFTER_SIZE} FROM channel.messages ORDER BY seq"
                ),
                nameplates=await conn.fetch(
                    f"SELECT {L.NAMEPLATE_COLUMNS} FROM channel.nameplates"
                ),
                nameplate_sides=await conn.fetch(
                    f"SELECT {L.NAMEPLATE_SIDE_COLUMNS} FROM channel.nameplate_sides"
                ),
            )
        load_state(rz, now, rows)

    async def read_bodies(self, app_id: str, mailbox_id: str) -> dict[int, str]:
        """A mailbox's bodies as hex (or as sent, for capitals), by sequence number."""
        rows = await self._pool.fetch(
            "SELECT seq, body, body_is_text FROM channel.messages"
            " WHERE app_id = $1 AND mailbox_id = $2",
            app_id,
            mailbox_id,
        )
        return {seq: body.decode("ascii") if is_text else body.hex() for seq, body, is_text in rows}

    def ping(self) -> None:
        """Raise if the last health probe failed (for /health, which must not wait)."""
        if self.ping_error is not None:
            raise StoreError(self.ping_error)

    async def _probe(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._pool.fetchval("SELECT 1"), PING_INTERVAL)
                self.ping_error = None
            except Exception as err:
                self.ping_error = str(err) or type(err).__name__
            await asyncio.sleep(PING_INTERVAL)

    # -- writes ---------------------------------------------------------------------

    def start(self, effects: list[fx.Effect], done: Done) -> None:
        """The group committer's Syncer: one transaction, `done` after its commit."""
        task = asyncio.get_running_loop().create_task(self._write(effects))
        self._tasks.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            if task.cancelled():
                done(StoreError("the write was cancelled"))
            else:
                done(task.exception())

        task.add_done_callback(finished)

    async def _write(self, effects: list[fx.Effect]) -> None:
        pg = self._pg
        batch = encode_batch(effects)
        if self._writer is None or self._writer.is_closed():
            try:
                self._writer = await pg.connect(self.url)
            except (OSError, pg.PostgresError) as err:
                raise StoreError(f"PostgreSQL unreachable: {err}") from err
        try:
            # one statement, so one round trip and (autocommit) one transaction
            await self._writer.execute("SELECT channel.apply_batch($1::jsonb)", batch)
        except (OSError, pg.PostgresError, pg.InterfaceError) as err:
            raise StoreError(f"transaction rolled back: {err}") from err


def encode_batch(effects: list[fx.Effect]) -> str:
    """The batch as the JSON array `channel.apply_batch` takes (store/schema/postgres-v1.sql)."""
    return orjson.dumps([_ENCODERS[type(e)](e) for e in effects]).decode()


def _message(e: fx.PutMessage) -> list[Any]:
    is_text = kept_as_text(e.body)
    return [
        "put_message", e.seq, e.app_id, e.mailbox_id, e.side, e.phase,
        e.body, is_text, e.server_rx, orjson.dumps(e.msg_id).decode(), e.owner,
    ]  # fmt: skip


_ENCODERS: dict[type, Callable[[Any], list[Any]]] = {
    fx.PutNameplate: lambda e: ["put_nameplate", e.app_id, e.name, e.mailbox_id, e.owner],
    fx.DeleteNameplate: lambda e: ["delete_nameplate", e.app_id, e.name],
    fx.PutNameplateSide: lambda e: [
        "put_nameplate_side",
        e.app_id,
        e.name,
        e.side,
        e.claimed,
        e.added,
    ],
    fx.PutMailbox: lambda e: [
        "put_mailbox",
        e.app_id,
        e.mailbox_id,
        e.for_nameplate,
        e.created,
        e.owner,
    ],
    fx.DeleteMailbox: lambda e: ["delete_mailbox", e.app_id, e.mailbox_id],
    fx.PutMailboxSide: lambda e: [
        "put_mailbox_side",
        e.app_id,
        e.mailbox_id,
        e.side,
        e.opened,
        e.added,
        e.mood,
    ],
    fx.PutMessage: _message,
    fx.UsageNameplate: lambda e: [
        "usage_nameplate",
        e.app_id,
        e.started,
        e.waiting_time,
        e.total_time,
        e.result,
    ],
    fx.UsageMailbox: lambda e: [
        "usage_mailbox",
        e.app_id,
        e.for_nameplate,
        e.started,
        e.waiting_time,
        e.total_time,
        e.result,
    ],
    fx.UsageClientVersion: lambda e: [
        "usage_client_version",
        e.app_id,
        e.side,
        e.connect_time,
        e.implementation,
        e.version,
    ],
    fx.UsageConnectionCount: lambda e: [
        "usage_connection_count",
        e.sampled,
        e.connections,
        e.bound,
        e.subscribed,
        e.nameplates,
        e.mailboxes,
        e.rebooted,
        e.blur_time,
    ],
}
