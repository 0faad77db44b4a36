"""Creating and checking versioned SQLite databases (the reference's database.py shape).

A new database is built in a temporary file and renamed into place, so a crash never
leaves a half-created file. An existing file must carry the version we support, or an
older one with an upgrade script (`schema/NAME-upgrade-vN-vM.sql`), which is applied in
one transaction: a crash leaves the old version whole.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pigeonhole.store.errors import DatabaseError


def schema_sql(name: str, version: int) -> str:
    return _schema_file(f"{name}-v{version}.sql").read_text()


def _schema_file(name: str) -> Traversable:
    """A file of this backend's schema folder (installed with the package)."""
    return resources.files("pigeonhole.store.sqlite") / "schema" / name


#: SQL functions an upgrade script calls, by name (the caller's own conversions)
SqlFunctions = Mapping[str, Callable[[Any], Any]]


def create_or_check(
    path: Path, name: str, version: int, functions: SqlFunctions | None = None
) -> None:
    """Create `path` from the schema if missing; else upgrade it to `version`, or check it."""
    if path.exists():
        found = _read_version(path)
        while found is not None and found < version and _has_upgrade(name, found):
            _upgrade(path, name, found, functions or {})
            found += 1
        if found != version:
            raise DatabaseError(f"{path}: unable to handle db version {found} (want {version})")
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


def _read_version(path: Path) -> int | None:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT version FROM version").fetchone()
        finally:
            db.close()
    except sqlite3.Error as err:
        raise DatabaseError(f"unable to open {path}: {err}") from err
    return None if row is None or not isinstance(row[0], int) else row[0]


def _upgrade_name(name: str, version: int) -> str:
    return f"{name}-upgrade-v{version}-v{version + 1}.sql"


def _has_upgrade(name: str, version: int) -> bool:
    return _schema_file(_upgrade_name(name, version)).is_file()


def _upgrade(path: Path, name: str, version: int, functions: SqlFunctions) -> None:
    script = _schema_file(_upgrade_name(name, version))
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for function_name, function in functions.items():
            db.create_function(function_name, 1, function, deterministic=True)
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(script.read_text()):
                db.execute(statement)
            db.execute("COMMIT")
        except Exception:
            db.execute("ROLLBACK")
            raise
    except (sqlite3.Error, ValueError) as err:
        raise DatabaseError(f"unable to upgrade {path} from version {version}: {err}") from err
    finally:
        db.close()


def _statements(script: str) -> list[str]:
    """Split a schema script into statements (executescript would commit on its own)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
