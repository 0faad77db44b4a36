"""The archive on disk: one SQLite file, `archive.sqlite`, in the server's data directory.

One table keyed by status-go's 40-byte key (`query.db_key`), a BLOB primary key, so
SQLite's memcmp order is LevelDB's order (notes §2.2) and a range scan reads envelopes
oldest first. WAL with `synchronous=FULL`: once `add_units` returns, its rows survive a
crash or `kill -9`. A new file is built aside and renamed into place, so a crash during
creation never leaves a half-made archive. Writes and reads use separate connections;
each connection must stay on one thread (the endpoint gives each its own executor).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Generator, Sequence
from pathlib import Path

from pigeonhole.archive.query import KeyRange
from pigeonhole.durable import fsync_path

SCHEMA_VERSION = 1
SCHEMA = """
-- the archive's schema version; one row
CREATE TABLE version (version INTEGER NOT NULL);
INSERT INTO version (version) VALUES (1);
CREATE TABLE envelopes (
    -- BE32(Expiry - TTL) ‖ keccak256(envelope RLP) ‖ topic: status-go's DB key, 40 bytes
    key BLOB PRIMARY KEY NOT NULL,
    -- the envelope's RLP exactly as received (the value status-go stored)
    rlp BLOB NOT NULL
) WITHOUT ROWID;
"""
#: rows fetched from SQLite at a time while scanning
SCAN_CHUNK = 256
#: rows deleted per transaction by retention (status-go's cleaner: 1000)
DELETE_BATCH = 1000

Row = tuple[bytes, bytes]


class ArchiveError(Exception):
    """The archive file cannot be created, or has a schema version we do not know."""


class ArchiveStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None

    def open(self) -> None:
        """Create the file if missing, check its version, open both connections."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            _create(self.path)
        self._writer = _connect(self.path)
        self._reader = _connect(self.path)
        row = self._reader.execute("SELECT version FROM version").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            self.close()
            raise ArchiveError(f"{self.path}: unknown archive version {row and row[0]}")

    def close(self) -> None:
        for db in (self._writer, self._reader):
            if db is not None:
                db.close()
        self._writer = self._reader = None

    def add_units(self, units: Sequence[Sequence[Row]]) -> list[int]:
        """Insert several units of rows in one transaction; per unit, how many were new.

        Re-archiving is idempotent (status-go's `Put` overwrote the same value).
        """
        db = self._write_db()
        counts: list[int] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            for rows in units:
                new = 0
                for key, raw in rows:
                    cursor = db.execute(
                        "INSERT OR IGNORE INTO envelopes (key, rlp) VALUES (?, ?)", (key, raw)
                    )
                    new += cursor.rowcount
                counts.append(new)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return counts

    def scan(self, keys: KeyRange) -> Generator[Row, None, None]:
        """Rows in `keys`, ascending by key, fetched lazily in chunks."""
        sql = "SELECT key, rlp FROM envelopes WHERE key >= ?"
        args: list[bytes] = [keys.start]
        if keys.after is not None:
            sql += " AND key > ?"
            args.append(keys.after)
        if keys.end is not None:
            sql += " AND key < ?"
            args.append(keys.end)
        cursor = self._read_db().execute(sql + " ORDER BY key", args)
        try:
            while chunk := cursor.fetchmany(SCAN_CHUNK):
                yield from chunk
        finally:
            cursor.close()

    def delete_before(self, cutoff_key: bytes) -> int:
        """Delete every key below `cutoff_key`, DELETE_BATCH rows per transaction."""
        db = self._write_db()
        deleted = 0
        while True:
            cursor = db.execute(
                "DELETE FROM envelopes WHERE key IN "
                "(SELECT key FROM envelopes WHERE key < ? ORDER BY key LIMIT ?)",
                (cutoff_key, DELETE_BATCH),
            )
            deleted += cursor.rowcount
            if cursor.rowcount < DELETE_BATCH:
                return deleted

    def count(self) -> int:
        row = self._read_db().execute("SELECT count(*) FROM envelopes").fetchone()
        return int(row[0])

    def ping(self) -> None:
        self._read_db().execute("SELECT 1").fetchone()

    def _write_db(self) -> sqlite3.Connection:
        if self._writer is None:
            raise ArchiveError("the archive is not open")
        return self._writer

    def _read_db(self) -> sqlite3.Connection:
        if self._reader is None:
            raise ArchiveError("the archive is not open")
        return self._reader


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def _create(path: Path) -> None:
    """Build the schema in a temporary file and rename it into place."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        db = sqlite3.connect(tmp)
        try:
            db.executescript(SCHEMA)
            db.commit()
        finally:
            db.close()
        os.replace(tmp, path)
        fsync_path(path.parent)  # the rename is durable
    except sqlite3.Error as err:
        raise ArchiveError(f"unable to create {path}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)
