"""A consistent copy of every SQLite database in a data directory, taken while it serves.

Copying the files of a live database is no backup: a page written between two reads, or a
write-ahead log left behind, makes a copy that is torn or older than it looks. SQLite's
online backup API copies the pages as one read transaction sees them, and in WAL mode that
reader never blocks the server's writer (nor the writer it). channel.sqlite and
usage.sqlite are copied in one read transaction over both (the server commits to both in
one), begun while the writer is held off for a moment (`_copy` says why); every other
`*.sqlite` of the directory (the archive's) is copied in a transaction of its own.

The copy is written into a temporary directory beside `out`, each file checked
(`PRAGMA quick_check`) and fsynced, then renamed to `out` in one step: `out` either holds
the whole backup or does not exist. An existing `out` is refused, and a failure (a full
disk) removes the temporary directory and leaves nothing behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pigeonhole.store.errors import BackupError

__all__ = ["BackupError", "Copied", "backup"]

#: the databases the server commits to in one transaction: copied from one snapshot
JOINT = ("channel.sqlite", "usage.sqlite")
#: how long the backup waits for a lock (only a WAL recovery holds readers off)
BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class Copied:
    name: str
    bytes: int


def backup(data_dir: Path, out: Path) -> list[Copied]:
    """Copy every database of `data_dir` into the new directory `out`, atomically."""
    if out.exists() or out.is_symlink():
        raise BackupError(f"{out} already exists: a backup goes to a new directory")
    if not data_dir.is_dir():
        raise BackupError(f"{data_dir} is not a directory (give the server's --data-dir)")
    names = sorted(path.name for path in data_dir.glob("*.sqlite") if path.is_file())
    if not names:
        raise BackupError(f"{data_dir} holds no database (*.sqlite): is it a --data-dir?")
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=parent))
    except OSError as err:
        raise BackupError(f"cannot write in {parent}: {_reason(err)}") from err
    try:
        joint = [name for name in JOINT if name in names]
        copied = _copy(data_dir, partial, joint)
        for name in names:
            if name not in joint:
                copied += _copy(data_dir, partial, [name])
        _fsync(partial)
        os.rename(partial, out)
        _fsync(parent)
    except (sqlite3.Error, OSError) as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise BackupError(f"the backup to {out} was not written: {_reason(err)}") from err
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return copied


def _copy(data_dir: Path, into: Path, names: list[str]) -> list[Copied]:
    """Copy `names` as one read transaction over all of them sees them."""
    if not names:
        return []
    source, schemas = _attached(data_dir, names)
    try:
        # In WAL mode a commit to several files is atomic per file only: a reader could
        # see one file's part of the server's last transaction and not the other's. So
        # the read snapshot is taken while another connection holds the write lock on
        # every file (no commit is half done then), and the lock goes at once after.
        quiet, _ = _attached(data_dir, names) if len(names) > 1 else (None, [])
        try:
            if quiet is not None:
                quiet.execute("BEGIN IMMEDIATE")
            source.execute("BEGIN")
            for schema in schemas:  # each file's snapshot starts at its first read
                source.execute(f"SELECT count(*) FROM {schema}.sqlite_master").fetchone()
        finally:
            if quiet is not None:
                quiet.close()  # rolls back: the writer is held for milliseconds
        copied = [
            _copy_one(source, schema, into / name)
            for schema, name in zip(schemas, names, strict=True)
        ]
        source.execute("COMMIT")
    finally:
        source.close()
    return copied


def _attached(data_dir: Path, names: list[str]) -> tuple[sqlite3.Connection, list[str]]:
    """A connection to the first database with the others ATTACHed, and their schemas."""
    first, *others = names
    db = sqlite3.connect(data_dir / first, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    schemas = ["main"]
    for n, name in enumerate(others):
        schemas.append(f"db{n}")
        db.execute(f"ATTACH DATABASE ? AS db{n}", (str(data_dir / name),))
    return db, schemas


def _copy_one(source: sqlite3.Connection, schema: str, path: Path) -> Copied:
    target = sqlite3.connect(path, isolation_level=None)
    try:
        source.backup(target, name=schema)  # every page in one step: one snapshot
        checked = target.execute("PRAGMA quick_check").fetchone()
        if checked is None or checked[0] != "ok":
            raise sqlite3.DatabaseError(f"{path.name}: the copy fails its check: {checked}")
        # a self-contained file: no write-ahead log beside it
        target.execute("PRAGMA journal_mode=DELETE")
    finally:
        target.close()
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    return Copied(path.name, path.stat().st_size)


def _fsync(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reason(err: BaseException) -> str:
    full = isinstance(err, sqlite3.OperationalError) and "full" in str(err)
    if full or (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)):
        return f"no space left on the disk ({err})"
    return str(err)
