"""The PostgreSQL store (`serve --store postgresql://...`): the SQLite store's job on a server.

The same effects become the same rows (store/schema/postgres-v1.sql), a batch is one
transaction, and its commit (`synchronous_commit` on: the WAL is flushed) is what a
reply waits for, as the SQLite store's fdatasync is. PostgreSQL already commits many
sessions per flush, so there is no separate sync step. A batch goes to the server in as
few round trips as its statements allow: consecutive rows of one kind are sent with one
`executemany`.

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
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

import orjson

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.store import loading as L
from pigeonhole.store.group_commit import Done
from pigeonhole.store.loading import StoredRows, load_state
from pigeonhole.store.sqlite import StoreError, stored_body

POSTGRES_VERSION = 1
#: advisory lock keys: creating the schema (per transaction), and the serving node
SCHEMA_LOCK = 0x50_69_67_01
NODE_LOCK = 0x50_69_67_02
#: seconds between health probes (`/health` reports the last one)
PING_INTERVAL = 2.0

Statement = tuple[str, tuple[Any, ...]]


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
        pg = _asyncpg()
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
        pg = _asyncpg()
        if self._writer is None or self._writer.is_closed():
            try:
                self._writer = await pg.connect(self.url)
            except (OSError, pg.PostgresError) as err:
                raise StoreError(f"PostgreSQL unreachable: {err}") from err
        try:
            async with self._writer.transaction():
                for sql, rows in _batches(effects):
                    if len(rows) == 1:
                        await self._writer.execute(sql, *rows[0])
                    else:
                        await self._writer.executemany(sql, rows)
        except (OSError, pg.PostgresError, pg.InterfaceError) as err:
            raise StoreError(f"transaction rolled back: {err}") from err


def _batches(effects: list[fx.Effect]) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """The batch's statements in order, consecutive runs of one statement joined."""
    sql: str | None = None
    rows: list[tuple[Any, ...]] = []
    for effect in effects:
        for statement, args in _STATEMENTS[type(effect)](effect):
            if statement != sql:
                if sql is not None:
                    yield sql, rows
                sql, rows = statement, []
            rows.append(args)
    if sql is not None:
        yield sql, rows


def _body(hex_body: str) -> tuple[bytes, bool]:
    stored = stored_body(hex_body)
    return (stored, False) if isinstance(stored, bytes) else (stored.encode("ascii"), True)


def _put_message(e: fx.PutMessage) -> list[Statement]:
    body, is_text = _body(e.body)
    return [
        (
            "INSERT INTO channel.messages (seq, app_id, mailbox_id, side, phase, body,"
            " body_is_text, server_rx, msg_id, owner) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
            " ON CONFLICT (seq) DO UPDATE SET app_id = EXCLUDED.app_id,"
            " mailbox_id = EXCLUDED.mailbox_id, side = EXCLUDED.side, phase = EXCLUDED.phase,"
            " body = EXCLUDED.body, body_is_text = EXCLUDED.body_is_text,"
            " server_rx = EXCLUDED.server_rx, msg_id = EXCLUDED.msg_id, owner = EXCLUDED.owner",
            (
                e.seq,
                e.app_id,
                e.mailbox_id,
                e.side,
                e.phase,
                body,
                is_text,
                e.server_rx,
                orjson.dumps(e.msg_id).decode(),
                e.owner,
            ),
        )
    ]


_DELETE_MAILBOX = [
    "DELETE FROM channel.messages WHERE app_id = $1 AND mailbox_id = $2",
    "DELETE FROM channel.mailbox_sides WHERE app_id = $1 AND mailbox_id = $2",
    "DELETE FROM channel.mailboxes WHERE app_id = $1 AND id = $2",
]

_STATEMENTS: dict[type, Callable[[Any], list[Statement]]] = {
    fx.PutNameplate: lambda e: [
        (
            "INSERT INTO channel.nameplates (app_id, name, mailbox_id, owner)"
            " VALUES ($1,$2,$3,$4) ON CONFLICT (app_id, name) DO UPDATE"
            " SET mailbox_id = EXCLUDED.mailbox_id, owner = EXCLUDED.owner",
            (e.app_id, e.name, e.mailbox_id, e.owner),
        )
    ],
    fx.DeleteNameplate: lambda e: [
        ("DELETE FROM channel.nameplate_sides WHERE app_id = $1 AND name = $2", (e.app_id, e.name)),
        ("DELETE FROM channel.nameplates WHERE app_id = $1 AND name = $2", (e.app_id, e.name)),
    ],
    fx.PutNameplateSide: lambda e: [
        (
            "INSERT INTO channel.nameplate_sides (app_id, name, side, claimed, added)"
            " VALUES ($1,$2,$3,$4,$5) ON CONFLICT (app_id, name, side) DO UPDATE"
            " SET claimed = EXCLUDED.claimed, added = EXCLUDED.added",
            (e.app_id, e.name, e.side, e.claimed, e.added),
        )
    ],
    fx.PutMailbox: lambda e: [
        (
            "INSERT INTO channel.mailboxes (app_id, id, for_nameplate, created, owner)"
            " VALUES ($1,$2,$3,$4,$5) ON CONFLICT (app_id, id) DO UPDATE"
            " SET for_nameplate = EXCLUDED.for_nameplate, created = EXCLUDED.created,"
            " owner = EXCLUDED.owner",
            (e.app_id, e.mailbox_id, e.for_nameplate, e.created, e.owner),
        )
    ],
    fx.DeleteMailbox: lambda e: [(sql, (e.app_id, e.mailbox_id)) for sql in _DELETE_MAILBOX],
    fx.PutMailboxSide: lambda e: [
        (
            "INSERT INTO channel.mailbox_sides (app_id, mailbox_id, side, opened, added, mood)"
            " VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (app_id, mailbox_id, side) DO UPDATE"
            " SET opened = EXCLUDED.opened, added = EXCLUDED.added, mood = EXCLUDED.mood",
            (e.app_id, e.mailbox_id, e.side, e.opened, e.added, e.mood),
        )
    ],
    fx.PutMessage: _put_message,
    fx.UsageNameplate: lambda e: [
        (
            "INSERT INTO usage.nameplates (app_id, started, waiting_time, total_time, result)"
            " VALUES ($1,$2,$3,$4,$5)",
            (e.app_id, e.started, e.waiting_time, e.total_time, e.result),
        )
    ],
    fx.UsageMailbox: lambda e: [
        (
            "INSERT INTO usage.mailboxes"
            " (app_id, for_nameplate, started, waiting_time, total_time, result)"
            " VALUES ($1,$2,$3,$4,$5,$6)",
            (e.app_id, e.for_nameplate, e.started, e.waiting_time, e.total_time, e.result),
        )
    ],
    fx.UsageClientVersion: lambda e: [
        (
            "INSERT INTO usage.client_versions"
            " (app_id, side, connect_time, implementation, version) VALUES ($1,$2,$3,$4,$5)",
            (e.app_id, e.side, e.connect_time, e.implementation, e.version),
        )
    ],
    fx.UsageConnectionCount: lambda e: [
        (
            "INSERT INTO usage.connection_counts"
            " (sampled, connections, bound, subscribed, nameplates, mailboxes)"
            " VALUES ($1,$2,$3,$4,$5,$6)",
            (e.sampled, e.connections, e.bound, e.subscribed, e.nameplates, e.mailboxes),
        ),
        ("DELETE FROM usage.current", ()),
        (
            "INSERT INTO usage.current (rebooted, updated, blur_time, connections)"
            " VALUES ($1,$2,$3,$4)",
            (e.rebooted, e.sampled, e.blur_time, e.connections),
        ),
    ],
}
