"""The PostgreSQL schema: created, upgraded or checked when a node opens the store.

In one transaction under an advisory lock, so nodes starting together cannot race:
postgres-v1.sql (schemas `channel` and `usage`, the SQLite files' tables and columns), then
postgres-upgrade-v1-v2.sql, -v2-v3.sql, -v3-v4.sql, -v4-v5.sql, -v5-v6.sql and -v6-v7.sql.
`channel.version` holds the version; a database of a newer version is refused.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from pigeonhole.store.errors import StoreError

POSTGRES_VERSION = 7
#: advisory lock key for creating or upgrading the schema (per transaction)
SCHEMA_LOCK = 0x50_69_67_01


def schema_sql(name: str) -> str:
    """A file of this backend's schema folder (installed with the package)."""
    return (resources.files("pigeonhole.store.postgres") / "schema" / name).read_text()


async def create_or_upgrade(conn: Any) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
        exists = await conn.fetchval("SELECT to_regclass('channel.version') IS NOT NULL")
        if not exists:
            await conn.execute(schema_sql("postgres-v1.sql"))
            version = 1
        else:
            version = await conn.fetchval("SELECT max(version) FROM channel.version")
        if version == 1:
            await conn.execute(schema_sql("postgres-upgrade-v1-v2.sql"))
            version = 2
        if version == 2:
            await conn.execute(schema_sql("postgres-upgrade-v2-v3.sql"))
            version = 3
        if version == 3:
            await conn.execute(schema_sql("postgres-upgrade-v3-v4.sql"))
            version = 4
        if version == 4:
            await conn.execute(schema_sql("postgres-upgrade-v4-v5.sql"))
            version = 5
        if version == 5:
            await conn.execute(schema_sql("postgres-upgrade-v5-v6.sql"))
            version = 6
        if version == 6:
            await conn.execute(schema_sql("postgres-upgrade-v6-v7.sql"))
            version = 7
        if version != POSTGRES_VERSION:
            raise StoreError(
                f"unable to handle PostgreSQL schema version {version} (want {POSTGRES_VERSION})"
            )
