"""The SQLite store: one `write` is one transaction over the channel and usage databases.

Both files are in WAL mode. `write` commits with `synchronous=NORMAL`: the transaction is
in the write-ahead log (the OS's page cache) when it returns, which already survives a
killed process; `sync` then fdatasyncs both logs, after which everything written before
is durable against power loss too, exactly what `synchronous=FULL` gives per commit, but
one sync serves many transactions (store/group_commit.py). Readers (`export-usage`,
operators' tools) never block the writer. The usage database is ATTACHed to the same
connection so one transaction covers both (atomic per file in WAL mode). Message bodies
are stored as bytes and are not loaded with the state: `BodyReader` reads a mailbox's
bodies when a replay needs them. By default the server's store helper process
(helper.py) has its own connection and does `write` and `sync`; the event loop's
connection loads the state and serves reads. With
`--commit-sync thread` or `loop`, `write` runs on the loop's thread and `sync`, which only
touches file descriptors, in a worker thread or on the loop.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.store.bodies import stored_body
from pigeonhole.store.errors import StoreError
from pigeonhole.store.loading import (
    MESSAGE_COLUMNS_AFTER_SIZE,
    MESSAGE_COLUMNS_BEFORE_SIZE,
    OwnerOf,
    StoredRows,
    load_state,
    same_owner,
)
from pigeonhole.store.sqlite.channel_rows import LOAD_QUERIES, ChannelRows
from pigeonhole.store.sqlite.migrations import create_or_check

CHANNEL_VERSION = 3
USAGE_VERSION = 2


class SqliteStore:
    def __init__(self, channel_path: Path, usage_path: Path) -> None:
        self._channel_path = channel_path
        self._usage_path = usage_path
        self._db: sqlite3.Connection | None = None
        #: where each live nameplate and mailbox row is (store/sqlite/channel_rows.py)
        self._rows = ChannelRows()
        self._rows_read = False
        self._writers: dict[type, Writer] = {**self._rows.writers(), **_USAGE_WRITERS}
        #: open descriptors of the two write-ahead logs, for `sync`
        self._wal_fds: dict[str, int] = {}
        self._fd_lock = threading.Lock()

    def open(self) -> None:
        self._channel_path.parent.mkdir(parents=True, exist_ok=True)
        # the v1 -> v2 upgrade turns hex text into bytes the way `_put_message` does
        create_or_check(
            self._channel_path, "channel", CHANNEL_VERSION, {"stored_body": stored_body}
        )
        create_or_check(self._usage_path, "usage", USAGE_VERSION)
        db = sqlite3.connect(self._channel_path, isolation_level=None, check_same_thread=False)
        db.execute("ATTACH DATABASE ? AS usage", (str(self._usage_path),))
        for schema in ("main", "usage"):
            db.execute(f"PRAGMA {schema}.journal_mode=WAL")
            # durability comes from `sync` (fdatasync of the logs) before any reply
            db.execute(f"PRAGMA {schema}.synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        self._db = db
        self._rows_read = False

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        with self._fd_lock:
            for fd in self._wal_fds.values():
                os.close(fd)
            self._wal_fds.clear()

    def sync(self) -> None:
        """Make every transaction written so far durable: fdatasync both logs.

        A log that does not exist yet holds no transaction. The log files stay (same inode)
        while the store's connection is open: SQLite only rewinds them after checkpoints.
        """
        with self._fd_lock:
            for path in (self._channel_path, self._usage_path):
                wal = f"{path}-wal"
                fd = self._wal_fds.get(wal)
                if fd is None:
                    try:
                        fd = os.open(wal, os.O_RDONLY | os.O_CLOEXEC)
                    except FileNotFoundError:
                        continue
                    self._wal_fds[wal] = fd
                os.fdatasync(fd)

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("store is not open")
        return self._db

    def write(self, effects: list[fx.Effect]) -> None:
        """Apply every effect in one transaction; on any failure roll back and raise."""
        db = self.db
        writers = self._writers
        if not self._rows_read:  # only the writing connection needs them (the helper's)
            self._rows.read(db)
            self._rows_read = True
        self._rows.begin()
        try:
            db.execute("BEGIN IMMEDIATE")
            for effect in effects:
                writers[type(effect)](db, effect)
            db.execute("COMMIT")
        except Exception as err:
            # whatever failed (SQL, a value we cannot encode), nothing stays half-written
            if db.in_transaction:
                db.execute("ROLLBACK")
            self._rows.rolled_back()
            raise StoreError(f"transaction rolled back: {err}") from err

    def ping(self) -> None:
        """Raise if the database does not answer (for /health)."""
        self.db.execute("SELECT 1").fetchone()

    def load(self, rz: Rendezvous, now: float, owner_of: OwnerOf = same_owner) -> None:
        """Rebuild the in-memory state (store/loading.py); bodies stay in the database."""
        db = self.db
        load_state(
            rz,
            now,
            StoredRows(
                mailboxes=db.execute(LOAD_QUERIES["mailboxes"]),
                mailbox_sides=db.execute(LOAD_QUERIES["mailbox_sides"]),
                messages=db.execute(
                    f"SELECT {MESSAGE_COLUMNS_BEFORE_SIZE},"
                    " CASE typeof(body) WHEN 'blob' THEN length(body) ELSE length(body) / 2 END,"
                    f" {MESSAGE_COLUMNS_AFTER_SIZE} FROM messages ORDER BY seq"
                ),
                nameplates=db.execute(LOAD_QUERIES["nameplates"]),
                nameplate_sides=db.execute(LOAD_QUERIES["nameplate_sides"]),
            ),
            owner_of,
        )


Writer = Callable[[sqlite3.Connection, Any], object]


def _usage_nameplate(db: sqlite3.Connection, e: fx.UsageNameplate) -> None:
    db.execute(
        "INSERT INTO usage.nameplates (app_id, started, waiting_time, total_time, result)"
        " VALUES (?,?,?,?,?)",
        (e.app_id, e.started, e.waiting_time, e.total_time, e.result),
    )


def _usage_mailbox(db: sqlite3.Connection, e: fx.UsageMailbox) -> None:
    db.execute(
        "INSERT INTO usage.mailboxes"
        " (app_id, for_nameplate, started, waiting_time, total_time, result)"
        " VALUES (?,?,?,?,?,?)",
        (e.app_id, int(e.for_nameplate), e.started, e.waiting_time, e.total_time, e.result),
    )


def _usage_client_version(db: sqlite3.Connection, e: fx.UsageClientVersion) -> None:
    db.execute(
        "INSERT INTO usage.client_versions (app_id, side, connect_time, implementation, version)"
        " VALUES (?,?,?,?,?)",
        (e.app_id, e.side, e.connect_time, e.implementation, e.version),
    )


def _usage_connection_count(db: sqlite3.Connection, e: fx.UsageConnectionCount) -> None:
    db.execute(
        "INSERT INTO usage.connection_counts"
        " (sampled, connections, bound, subscribed, nameplates, mailboxes) VALUES (?,?,?,?,?,?)",
        (e.sampled, e.connections, e.bound, e.subscribed, e.nameplates, e.mailboxes),
    )
    db.execute("DELETE FROM usage.current")
    db.execute(
        "INSERT INTO usage.current (rebooted, updated, blur_time, connections) VALUES (?,?,?,?)",
        (e.rebooted, e.sampled, e.blur_time, e.connections),
    )


def _usage_transit(db: sqlite3.Connection, e: fx.UsageTransit) -> None:
    db.execute(
        "INSERT INTO usage.transit (started, total_time, waiting_time, total_bytes, result)"
        " VALUES (?,?,?,?,?)",
        (e.started, e.total_time, e.waiting_time, e.total_bytes, e.result),
    )


_USAGE_WRITERS: dict[type, Writer] = {
    fx.UsageNameplate: _usage_nameplate,
    fx.UsageMailbox: _usage_mailbox,
    fx.UsageClientVersion: _usage_client_version,
    fx.UsageConnectionCount: _usage_connection_count,
    fx.UsageTransit: _usage_transit,
}

#: every effect type `write` knows (what the store helper process may be sent)
WRITABLE_EFFECTS: tuple[type, ...] = (*ChannelRows().writers(), *_USAGE_WRITERS)


class BodyReader:
    """Reads message bodies for replays, on its own connection (used from one thread).

    A read transaction in WAL mode sees every committed batch and never blocks the
    writer. `read` returns the bodies of the mailbox's messages it is asked for, as hex,
    by sequence number (found by `seq`, the table's key: no index by mailbox).
    """

    def __init__(self, channel_path: Path) -> None:
        self._path = channel_path
        self._db: sqlite3.Connection | None = None

    def read(self, app_id: str, mailbox_id: str, seqs: list[int]) -> dict[int, str]:
        db = self._db
        if db is None:
            db = self._db = sqlite3.connect(
                f"file:{self._path}?mode=ro", uri=True, check_same_thread=False
            )
        rows = db.execute(
            "SELECT seq, body FROM messages WHERE seq IN (SELECT value FROM json_each(?))"
            " AND app_id=? AND mailbox_id=?",
            (json.dumps(seqs), app_id, mailbox_id),
        )
        return {seq: body.hex() if isinstance(body, bytes) else body for seq, body in rows}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
