"""The archive on disk: one SQLite file, `archive.sqlite`, in the server's data directory.

One table keyed by status-go's 40-byte key (`query.db_key`), a BLOB primary key, so
SQLite's memcmp order is LevelDB's order (notes §2.2) and a range scan reads envelopes
oldest first. WAL with `synchronous=FULL`: once `add_units` returns, its rows survive a
crash or `kill -9`. A new file is built aside and renamed into place, so a crash during
creation never leaves a half-made archive. Writes and reads use separate connections;
each connection must stay on one thread (the endpoint gives each its own executor).

Each row keeps the client that posted it (`owner`: an IPv4 address or an IPv6 prefix;
NULL under `--blur-usage`), so the per-client quota (archive/quota.py) is rebuilt from
the file on start. A version 1 file (no owner) is upgraded in place; its rows count
towards the total only.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Generator, Sequence
from pathlib import Path

from pigeonhole.archive.query import KeyRange
from pigeonhole.durable import fsync_path

SCHEMA_VERSION = 2
SCHEMA = """
-- the archive's schema version; one row
CREATE TABLE version (version INTEGER NOT NULL);
INSERT INTO version (version) VALUES (2);
CREATE TABLE envelopes (
    -- BE32(Expiry - TTL) ‖ keccak256(envelope RLP) ‖ topic: status-go's DB key, 40 bytes
    key BLOB PRIMARY KEY NOT NULL,
    -- the envelope's RLP exactly as received (the value status-go stored)
    rlp BLOB NOT NULL,
    -- the client that posted it, for its quota (NULL: nobody's, under --blur-usage)
    owner TEXT
) WITHOUT ROWID;
"""
UPGRADE_V1_V2 = """
ALTER TABLE envelopes ADD COLUMN owner TEXT;
UPDATE version SET version = 2;
"""
#: rows fetched from SQLite at a time while scanning
SCAN_CHUNK = 256
#: rows deleted per transaction by retention (status-go's cleaner: 1000)
DELETE_BATCH = 1000

#: (key, rlp): what a scan reads
Row = tuple[bytes, bytes]
#: (key, rlp, owner): what a post writes
NewRow = tuple[bytes, bytes, str | None]


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
        if row is not None and row[0] == 1:
            self._writer.executescript(f"BEGIN IMMEDIATE; {UPGRADE_V1_V2} COMMIT;")
            row = self._reader.execute("SELECT version FROM version").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            self.close()
            raise ArchiveError(f"{self.path}: unknown archive version {row and row[0]}")

    def close(self) -> None:
        for db in (self._writer, self._reader):
            if db is not None:
                db.close()
        self._writer = self._reader = None

    def add_units(self, units: Sequence[Sequence[NewRow]]) -> list[tuple[int, int]]:
        """Insert several units of rows in one transaction; per unit, (new rows, their bytes).

        Re-archiving is idempotent (status-go's `Put` overwrote the same value).
        """
        db = self._write_db()
        counts: list[tuple[int, int]] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            for rows in units:
                new = new_bytes = 0
                for key, raw, owner in rows:
                    cursor = db.execute(
                        "INSERT OR IGNORE INTO envelopes (key, rlp, owner) VALUES (?, ?, ?)",
                        (key, raw, owner),
                    )
                    if cursor.rowcount:
                        new += 1
                        new_bytes += len(raw)
                counts.append((new, new_bytes))
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

    def delete_before(self, cutoff_key: bytes) -> tuple[int, Counter[str]]:
        """Delete every key below `cutoff_key`, DELETE_BATCH rows per transaction.

        Returns how many rows went and their bytes per owner ("" for nobody's).
        """
        db = self._write_db()
        deleted = 0
        freed: Counter[str] = Counter()
        while True:
            rows = db.execute(
                "DELETE FROM envelopes WHERE key IN "
                "(SELECT key FROM envelopes WHERE key < ? ORDER BY key LIMIT ?)"
                " RETURNING coalesce(owner, ''), length(rlp)",
                (cutoff_key, DELETE_BATCH),
            ).fetchall()
            deleted += len(rows)
            for owner, size in rows:
                freed[owner] += size
            if len(rows) < DELETE_BATCH:
                return deleted, freed

    def held(self) -> list[tuple[str, int]]:
        """Bytes stored per owner ("" for nobody's), to rebuild the quota on start."""
        rows = self._read_db().execute(
            "SELECT coalesce(owner, ''), sum(length(rlp)) FROM envelopes GROUP BY owner"
        )
        return [(owner, int(size)) for owner, size in rows]

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
