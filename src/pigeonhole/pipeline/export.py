"""`export-usage`: copy new usage rows from the server's SQLite database into the dataset.

The database is opened read-only through a `file:...?mode=ro` URI, and every table is read
inside one read transaction, so the export sees one consistent snapshot while the server
keeps writing (WAL readers never block the writer). Rows are copied by their growing `id`
from the cursor that the dataset keeps, in pages, so memory stays bounded; the pages are
published together by `DatasetWriter.commit`, which makes the run atomic and idempotent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

from pigeonhole.pipeline.config import ExportConfig
from pigeonhole.pipeline.dataset import (
    CURRENT_SCHEMA,
    SCHEMAS,
    TIME_COLUMNS,
    CommitResult,
    DatasetWriter,
    seconds_to_micros,
)

#: SQLite usage-v1 tables and the columns copied, in the dataset's order.
_COLUMNS = {name: schema.names for name, schema in SCHEMAS.items()}
_SUPPORTED_DB_VERSIONS = frozenset({1})


class ExportError(Exception):
    """The usage database cannot be exported (missing, or an unknown schema version)."""


def export_usage(config: ExportConfig) -> CommitResult:
    """Export every row newer than the dataset's cursor; return what became visible."""
    if not config.db_path.exists():
        raise ExportError(f"no usage database at {config.db_path}")
    writer = DatasetWriter(config.out_dir)
    writer.recover()
    cursor = writer.cursor()
    con = sqlite3.connect(f"{config.db_path.resolve().as_uri()}?mode=ro", uri=True)
    con.isolation_level = None
    try:
        con.execute("BEGIN")  # one snapshot for every table
        _check_version(con)
        for table in SCHEMAS:
            for page in _pages(con, table, cursor[table], config.page_rows):
                writer.stage(table, page)
                cursor[table] = int(page.column("id")[-1].as_py())
        current = _current(con)
        if current is not None:
            writer.stage_current(current)
        con.execute("COMMIT")
    finally:
        con.close()
    return writer.commit(cursor)


def _check_version(con: sqlite3.Connection) -> None:
    row = con.execute("SELECT version FROM version").fetchone()
    if row is None or row[0] not in _SUPPORTED_DB_VERSIONS:
        raise ExportError(f"unsupported usage database version: {row and row[0]}")


def _pages(con: sqlite3.Connection, table: str, after: int, size: int) -> Iterator[pa.Table]:
    columns = ", ".join(_COLUMNS[table])
    sql = f"SELECT {columns} FROM {table} WHERE id > ? ORDER BY id LIMIT ?"
    while True:
        rows = con.execute(sql, (after, size)).fetchall()
        if not rows:
            return
        page = _to_arrow(table, rows)
        yield page
        after = int(rows[-1][0])


def _to_arrow(table: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    schema = SCHEMAS[table]
    arrays = []
    for index, field in enumerate(schema):
        values = [row[index] for row in rows]
        if field.name == TIME_COLUMNS[table]:
            arrays.append(
                pa.array(seconds_to_micros(np.array(values)), pa.int64()).cast(field.type)
            )
        elif pa.types.is_boolean(field.type):
            arrays.append(pa.array([bool(v) for v in values], field.type))
        else:
            arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _current(con: sqlite3.Connection) -> pa.Table | None:
    row = con.execute("SELECT rebooted, updated, blur_time, connections FROM current").fetchone()
    if row is None:
        return None
    times = seconds_to_micros(np.array(row[:2]))
    return pa.table(
        {
            "rebooted": pa.array([times[0]], pa.int64()).cast(
                CURRENT_SCHEMA.field("rebooted").type
            ),
            "updated": pa.array([times[1]], pa.int64()).cast(CURRENT_SCHEMA.field("updated").type),
            "blur_time": pa.array([row[2]], pa.int64()),
            "connections": pa.array([row[3]], pa.int64()),
        },
        schema=CURRENT_SCHEMA,
    )
