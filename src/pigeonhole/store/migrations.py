"""Creating and checking versioned SQLite databases (the reference's database.py shape).

A new database is built in a temporary file and renamed into place, so a crash never
leaves a half-created file. An existing file must carry the version we support.
"""

from __future__ import annotations

import os
import sqlite3
from importlib import resources
from pathlib import Path


class DatabaseError(Exception):
    """The database cannot be created or has a version we do not know."""


def schema_sql(name: str, version: int) -> str:
    return (resources.files("pigeonhole.store") / "schema" / f"{name}-v{version}.sql").read_text()


def create_or_check(path: Path, name: str, version: int) -> None:
    """Create `path` from the schema if missing; else check its version."""
    if path.exists():
        _check_version(path, version)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        db = sqlite3.connect(tmp)
        db.executescript(schema_sql(name, version))
        db.commit()
        db.close()
        os.replace(tmp, path)
    except sqlite3.Error as err:
        raise DatabaseError(f"unable to create {path}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)


def _check_version(path: Path, version: int) -> None:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT version FROM version").fetchone()
        finally:
            db.close()
    except sqlite3.Error as err:
        raise DatabaseError(f"unable to open {path}: {err}") from err
    if row is None or row[0] != version:
        found = None if row is None else row[0]
        raise DatabaseError(f"{path}: unable to handle db version {found} (want {version})")
