"""Reading the usage tables from PostgreSQL (`export-usage --store postgresql://...`).

The exporter speaks to its source through a small DB-API-like surface (`execute` with
`?` parameters, then `fetchall`/`fetchone`), which SQLite's connection has; this adapter
gives asyncpg the same surface on a private event loop, so the export logic is one.
`BEGIN` opens a read-only REPEATABLE READ transaction: one snapshot of every table,
which never blocks the server's writes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

_PARAM = re.compile(r"\?")


class Rows:
    def __init__(self, rows: Sequence[Any]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._rows]

    def fetchone(self) -> tuple[Any, ...] | None:
        return tuple(self._rows[0]) if self._rows else None


class PostgresReader:
    def __init__(self, url: str) -> None:
        import asyncpg  # type: ignore[import-untyped, unused-ignore]

        self._loop = asyncio.new_event_loop()
        self._conn = self._loop.run_until_complete(asyncpg.connect(url))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        if sql == "BEGIN":
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        numbered = iter(range(1, len(params) + 1))
        sql = _PARAM.sub(lambda _: f"${next(numbered)}", sql)
        return Rows(self._loop.run_until_complete(self._conn.fetch(sql, *params)))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._conn.close())
        finally:
            self._loop.close()
