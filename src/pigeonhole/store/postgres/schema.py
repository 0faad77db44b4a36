"""The PostgreSQL schema: created, upgraded or checked when a node opens the store.

In one transaction under an advisory lock, so nodes starting together cannot race:
postgres-v1.sql (schemas `channel` and `usage`, the SQLite files' tables and columns), then
each postgres-upgrade-vN-vN+1.sql in turn up to POSTGRES_VERSION. `channel.version` holds
the version; a database of a newer version is refused. An upgrade that locks tables
(v7 -> v8) may deadlock with the batches of nodes still running: it is rolled back and
tried again.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from pigeonhole.store.errors import StoreError

POSTGRES_VERSION = 11
#: advisory lock key for creating or upgrading the schema (per transaction)
SCHEMA_LOCK = 0x50_69_67_01
#: tries of the whole transaction when it deadlocks (SQLSTATE 40P01)
UPGRADE_TRIES = 5


def schema_sql(name: str) -> str:
    """A file of this backend's schema folder (installed with the package)."""
    return (resources.files("pigeonhole.store.postgres") / "schema" / name).read_text()


def upgrade_file(version: int) -> str:
    """The file that upgrades a database of `version` to the next."""
    return f"postgres-upgrade-v{version}-v{version + 1}.sql"


async def create_or_upgrade(conn: Any) -> None:
    for tries_left in range(UPGRADE_TRIES - 1, -1, -1):
        try:
            await _create_or_upgrade(conn)
            return
        except Exception as err:
            if tries_left == 0 or getattr(err, "sqlstate", None) != "40P01":
                raise


async def _create_or_upgrade(conn: Any) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
        exists = await conn.fetchval("SELECT to_regclass('channel.version') IS NOT NULL")
        if not exists:
            await conn.execute(schema_sql("postgres-v1.sql"))
            version = 1
        else:
            version = await conn.fetchval("SELECT max(version) FROM channel.version")
        while version is not None and 1 <= version < POSTGRES_VERSION:
            await conn.execute(schema_sql(upgrade_file(version)))
            version += 1
        if version != POSTGRES_VERSION:
            raise StoreError(
                f"unable to handle PostgreSQL schema version {version} (want {POSTGRES_VERSION})"
            )
