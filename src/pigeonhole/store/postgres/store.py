"""The PostgreSQL store (`serve --store postgresql://...`): one database, any number of nodes.

The database is the truth, not a node's memory (shared.py says how a batch of commands is
decided in one transaction). This module holds the connections and the SQL:
- the schema, created or upgraded at start (schema.py);
- `decide`: one transaction on the node's writer connection: `channel.lock_and_load`,
  the caller's decision, `channel.apply_batch` (writes and NOTIFY), commit. A commit
  (`synchronous_commit` on: the WAL is flushed) is what a reply waits for;
- a listening connection (autocommit, never used for anything else) that hands each
  notification to the node and, after it was lost, reconnects, LISTENs again and tells
  the node to re-read what it may have missed;
- the leader lock: a session advisory lock on a connection of its own, so exactly one
  node prunes (and folds `channel.holdings`) and samples usage, and a node that dies
  (kill -9) lets it go with its connection;
- batch and read connections whose backends keep their heap between batches (connect.py);
- a small pool for reads: totals and top holders (from `channel.holdings`, which the
  database's triggers keep: schema/postgres-upgrade-v7-v8.sql), the nodes table, bodies
  too big to notify, health.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from pigeonhole.store.errors import Conflict, Refused, StoreError
from pigeonhole.store.postgres.connect import connect, keep_heap
from pigeonhole.store.postgres.schema import create_or_upgrade
from pigeonhole.store.postgres.waiting import WaitingTable

#: advisory lock key of the leader
LEADER_LOCK = 0x50_69_67_03
#: seconds between health probes (`/health` reports the last one)
PING_INTERVAL = 2.0
#: seconds the read pool's connections get to finish at close before they are cut
POOL_CLOSE_TIMEOUT = 5.0
#: the channel every node LISTENs on
CHANNEL = "pigeonhole"
#: SQLSTATEs after which a batch is decided again: unique violation (two nodes made one
#: nameplate), deadlock, serialization failure
RETRY_STATES = frozenset({"23505", "40P01", "40001"})
#: shard rows of `channel.holdings` folded per transaction, and transactions per fold
FOLD_CHUNK = 5000
FOLD_CHUNKS = 20

T = TypeVar("T")
#: the node's notification handler (payload), and what it does after a lost listener
OnNotify = Callable[[str], None]
OnResync = Callable[[], Awaitable[None]]


#: SQLSTATE classes of a database that is unwell (connection, resources, operator, system):
#: anything else means the database refused what the batch holds
UNWELL_CLASSES = frozenset({"08", "53", "55", "57", "58", "XX"})


def _asyncpg() -> Any:
    try:
        import asyncpg  # type: ignore[import-untyped, unused-ignore]
    except ImportError as err:  # an optional dependency: `pip install pigeonhole[postgres]`
        raise StoreError(
            "the PostgreSQL store needs asyncpg: pip install -e '.[postgres]'"
        ) from err
    return asyncpg


def _quoted(text: str) -> str:
    """`text` as a dollar-quoted SQL literal, its tag one the text does not contain."""
    tag, n = "$b$", 0
    while tag in text:
        n += 1
        tag = f"$b{n}$"
    return f"{tag}{text}{tag}"


class PostgresStore:
    def __init__(self, url: str) -> None:
        self.url = url
        #: the asyncpg module, imported when the store opens (an optional dependency)
        self._pg: Any = None
        #: idle connections for batches (one per batch running at once)
        self._writers: list[Any] = []
        self._listener: Any = None
        self._leader: Any = None
        self._pool: Any = None
        self._ping_task: asyncio.Task[None] | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._on_notify: OnNotify | None = None
        self._on_resync: OnResync | None = None
        self._closing = False
        self._listening = False
        self._leading = False
        #: why the last health probe failed (None: it answered)
        self.ping_error: str | None = None
        #: notifications received, and times the listener was connected again
        self.notifications = 0
        self.relistens = 0

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and create, upgrade or check the schema."""
        pg = self._pg = _asyncpg()
        try:
            writer = await connect(pg, self.url)
            self._writers.append(writer)  # the first batch's, once the schema is made
            await create_or_upgrade(writer)
            self._pool = await pg.create_pool(self.url, min_size=1, max_size=4, init=keep_heap)
        except (OSError, pg.PostgresError) as err:
            await self.close()
            raise StoreError(f"cannot open the PostgreSQL store: {err}") from err
        except BaseException:
            await self.close()
            raise
        self._ping_task = asyncio.get_running_loop().create_task(self._probe())

    async def listen(self, on_notify: OnNotify, on_resync: OnResync) -> None:
        """LISTEN now (before the node serves), and keep listening until `close`."""
        self._on_notify, self._on_resync = on_notify, on_resync
        await self._connect_listener()
        self._listening = True
        self._listen_task = asyncio.get_running_loop().create_task(self._keep_listening())

    async def _connect_listener(self) -> None:
        conn = await self._pg.connect(self.url)
        await conn.add_listener(CHANNEL, self._notified)
        self._listener = conn

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self.notifications += 1
        if self._on_notify is not None:
            self._on_notify(payload)

    async def _keep_listening(self) -> None:
        """Notice a lost listener, connect again, LISTEN, and have the node re-read."""
        while not self._closing:
            await asyncio.sleep(0.5)
            conn = self._listener
            if conn is not None and not conn.is_closed():
                continue
            try:
                await self._connect_listener()
            except Exception as err:
                self.ping_error = f"listener: {err}"
                continue
            self.relistens += 1
            if self._on_resync is not None:
                await self._on_resync()

    async def close(self) -> None:
        self._closing = True
        for name in ("_ping_task", "_listen_task"):
            task = getattr(self, name)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                setattr(self, name, None)
        if self._pool is not None:
            # a read cancelled with its task (the health probe) can leave a connection
            # that asyncpg's close waits for without end: its connections are cut then
            try:
                await asyncio.wait_for(self._pool.close(), POOL_CLOSE_TIMEOUT)
            except TimeoutError:
                self._pool.terminate()
            self._pool = None
        writers, self._writers = self._writers, []
        for conn in writers:
            with contextlib.suppress(Exception):
                await conn.close()
        for name in ("_listener", "_leader"):
            conn = getattr(self, name)
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
                setattr(self, name, None)

    # -- the batch ------------------------------------------------------------------

    async def decide(
        self,
        spec: dict[str, Any],
        decide: Callable[[dict[str, Any]], tuple[T, str]],
        more: Callable[[], bool] = lambda: False,
    ) -> T:
        """Lock and load `spec`, decide, write what `decide` returns, commit; its result.

        When `more()` says another batch is waiting as this one commits, the next
        transaction is begun in the same round trip (so that batch's first message is its
        lock_and_load); a writer is left inside a transaction only then, never idle.

        `Conflict` when another node's batch collided (decide again); `StoreError` when
        the database failed (nothing was written).
        """
        pg = self._pg
        writer = None
        reusable = False
        try:
            writer = self._writers.pop() if self._writers else None
            if writer is None or writer.is_closed():
                writer = await connect(pg, self.url)
            if not writer.is_in_transaction():
                await writer.execute("BEGIN")
            loaded = orjson.loads(
                await writer.fetchval(
                    "SELECT channel.lock_and_load($1::jsonb)::text", orjson.dumps(spec).decode()
                )
            )
            result, batch = decide(loaded)
            then = "; BEGIN" if more() else ""
            await writer.execute(
                f"SELECT channel.apply_batch({_quoted(batch)}::jsonb); COMMIT{then}"
            )
            reusable = True
            return result
        except pg.PostgresError as err:
            if writer is not None:
                with contextlib.suppress(Exception):
                    await writer.execute("ROLLBACK")
                    reusable = True
            state = str(getattr(err, "sqlstate", "") or "")
            if state in RETRY_STATES:
                raise Conflict(str(err)) from err
            if state[:2] not in UNWELL_CLASSES:
                raise Refused(f"refused by the database: {err}") from err
            raise StoreError(f"transaction rolled back: {err}") from err
        except (OSError, pg.InterfaceError) as err:
            raise StoreError(f"PostgreSQL unreachable: {err}") from err
        finally:
            if writer is not None:
                if reusable and not writer.is_closed():
                    self._writers.append(writer)
                else:
                    writer.terminate()  # cancelled or broken mid-transaction: not reused

    async def write(self, batch: str) -> None:
        """Effects that need no decision (usage samples), in a transaction of their own."""
        await self._pool.execute("SELECT channel.apply_batch($1::jsonb)", batch)

    # -- the leader -----------------------------------------------------------------

    async def lead(self) -> bool:
        """Hold (or try to take) the leader lock; False while another node holds it.

        The lock is a session lock on a connection of its own, kept open between tries:
        it goes when this node's connection does (a node killed with SIGKILL included).
        """
        try:
            if self._leader is None or self._leader.is_closed():
                self._leader = await self._pg.connect(self.url)
                self._leading = False
            if self._leading:
                await self._leader.fetchval("SELECT 1")
            else:
                self._leading = bool(
                    await self._leader.fetchval("SELECT pg_try_advisory_lock($1)", LEADER_LOCK)
                )
        except Exception:
            self._leading = False
            if self._leader is not None:
                with contextlib.suppress(Exception):
                    await self._leader.close()
            self._leader = None
        return self._leading

    async def grant_grace(self, now: float) -> None:
        """A new leader gives every channel a fresh expiry window (the reconnect grace
        the clients of a node that went away need)."""
        await self._pool.execute(
            "UPDATE channel.mailboxes SET updated = greatest(updated, $1)", now
        )

    async def idle_mailboxes(self, before: float, limit: int) -> list[tuple[str, str]]:
        rows = await self._pool.fetch(
            "SELECT app_id, id FROM channel.mailboxes WHERE updated < $1 LIMIT $2",
            before,
            limit,
        )
        return [(app_id, mailbox_id) for app_id, mailbox_id in rows]

    async def touch(self, mailboxes: list[tuple[str, str]], now: float, fresh: float) -> None:
        """Keep mailboxes alive that this node's connections are subscribed to: each one
        not used in the last `fresh` seconds is marked used now (those a batch touched
        since are left as they are: no rewrite, no row lock taken from a batch)."""
        if not mailboxes:
            return
        await self._pool.execute(
            "UPDATE channel.mailboxes m SET updated = $3"
            " FROM unnest($1::text[], $2::text[]) AS t(app_id, id)"
            " WHERE m.app_id = t.app_id AND m.id = t.id AND m.updated <= $3::float8 - $4::float8",
            [a for a, _ in mailboxes],
            [i for _, i in mailboxes],
            now,
            fresh,
        )

    # -- reads ----------------------------------------------------------------------

    async def totals(self) -> tuple[int, int, int]:
        """(nameplates, mailboxes, stored body bytes) across every node: the shards of
        `channel.holdings`' totals (owner ''), not a count of the rows."""
        row = await self._pool.fetchrow(
            "SELECT coalesce(sum(nameplates), 0), coalesce(sum(mailboxes), 0),"
            " coalesce(sum(bytes), 0) FROM channel.holdings WHERE owner = ''"
        )
        return int(row[0]), int(row[1]), int(row[2])

    async def top_holders(self, limit: int) -> dict[str, int]:
        """The client addresses holding the most stored body bytes, across every node."""
        rows = await self._pool.fetch(
            "SELECT owner, sum(bytes) FROM channel.holdings WHERE owner <> ''"
            " GROUP BY owner HAVING sum(bytes) > 0 ORDER BY 2 DESC LIMIT $1",
            limit,
        )
        return {owner: int(total) for owner, total in rows}

    async def fold_holdings(self) -> int:
        """Fold the shards of `channel.holdings` no transaction is writing (the leader,
        at each pruning run): FOLD_CHUNK rows per transaction, at most FOLD_CHUNKS of
        them; a deadlock or serialization failure ends it (the next run tries again).
        The shard rows folded."""
        folded = 0
        for _ in range(FOLD_CHUNKS):
            try:
                done = await self._pool.fetchval("SELECT channel.fold_holdings($1)", FOLD_CHUNK)
            except self._pg.PostgresError as err:
                if str(getattr(err, "sqlstate", "")) in RETRY_STATES:
                    return folded
                raise
            folded += int(done)
            if done < FOLD_CHUNK:
                break
        return folded

    async def report_node(
        self, node: str, started: float, now: float, counts: tuple[int, int, int]
    ) -> None:
        await self._pool.execute(
            "INSERT INTO channel.nodes (node, started, updated, connections, bound, subscribed)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (node) DO UPDATE SET"
            " updated = EXCLUDED.updated, connections = EXCLUDED.connections,"
            " bound = EXCLUDED.bound, subscribed = EXCLUDED.subscribed",
            node,
            started,
            now,
            *counts,
        )

    async def node_sums(self, since: float) -> tuple[int, int, int, int]:
        """(nodes, connections, bound, subscribed) of the nodes that reported since."""
        row = await self._pool.fetchrow(
            "SELECT count(*), coalesce(sum(connections), 0), coalesce(sum(bound), 0),"
            " coalesce(sum(subscribed), 0) FROM channel.nodes WHERE updated >= $1",
            since,
        )
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    def waiting_table(self, address: str, max_age: float) -> WaitingTable:
        """The transit relay's waiting connections, as the node at `address` sees them
        (used once the store is open)."""
        return WaitingTable(self._pool, address, max_age)

    async def forget_node(self, node: str) -> None:
        await self._pool.execute("DELETE FROM channel.nodes WHERE node = $1", node)

    async def message(self, seq: int) -> tuple[str, str, dict[str, Any]] | None:
        """One message by number: (app, mailbox, frame), or None once deleted."""
        row = await self._pool.fetchrow(f"SELECT app_id, mailbox_id, {_FRAME} WHERE seq = $1", seq)
        return None if row is None else (row[0], row[1], _frame(row[2:]))

    async def messages_after(
        self, app_id: str, mailbox_id: str, after: int
    ) -> list[tuple[int, dict[str, Any]]]:
        """A mailbox's messages numbered above `after`, as (seq, frame), in order."""
        rows = await self._pool.fetch(
            f"SELECT seq, {_FRAME} WHERE app_id = $1 AND mailbox_id = $2 AND seq > $3 ORDER BY seq",
            app_id,
            mailbox_id,
            after,
        )
        return [(row[0], _frame(row[1:])) for row in rows]

    # -- usage retention (store/retention.py) -------------------------------------------

    async def usage_window(
        self, table: str, column: str, after: int, before: float, limit: int
    ) -> tuple[int, int | None]:
        """Delete the rows older than `before` among the `limit` next ids of a usage table
        (a `retention.Window`): two short statements on the pool, each its own transaction."""
        last = await self._pool.fetchval(
            f"SELECT max(id) FROM (SELECT id FROM usage.{table} WHERE id > $1"
            " ORDER BY id LIMIT $2) AS w",
            after,
            limit,
        )
        if last is None:
            return 0, None
        status = await self._pool.execute(
            f"DELETE FROM usage.{table} WHERE id > $1 AND id <= $2 AND {column} < $3"
            f" AND id < (SELECT max(id) FROM usage.{table})",  # the newest stays (retention.py)
            after,
            last,
            before,
        )
        return int(status.split()[-1]), int(last)

    async def usage_bytes(self) -> int:
        """Bytes the usage schema's tables take (their indexes and TOAST included)."""
        total = await self._pool.fetchval(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'usage' AND c.relkind = 'r'"
        )
        return int(total)

    def ping(self) -> None:
        """Raise if the last health probe failed (for /health, which must not wait)."""
        if self.ping_error is not None:
            raise StoreError(self.ping_error)

    async def _probe(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._pool.fetchval("SELECT 1"), PING_INTERVAL)
                listener = self._listener
                if self._listening and (listener is None or listener.is_closed()):
                    raise StoreError("the listening connection is down")
                self.ping_error = None
            except Exception as err:
                self.ping_error = str(err) or type(err).__name__
            await asyncio.sleep(PING_INTERVAL)


#: a stored message's columns that make its `message` frame (`_frame`), and the table
_FRAME = "side, phase, body, body_is_text, server_rx, msg_id FROM channel.messages"


def _frame(row: Any) -> dict[str, Any]:
    side, phase, body, is_text, server_rx, msg_id = row
    return {
        "type": "message",
        "side": side,
        "phase": phase,
        "body": body.decode("ascii") if is_text else body.hex(),
        "server_rx": server_rx,
        "id": orjson.loads(msg_id),
    }
