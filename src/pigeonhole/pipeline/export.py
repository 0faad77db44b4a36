"""`export-usage`: copy new usage rows from the server's SQLite database into the dataset.

The source is Pigeonhole's `usage.sqlite` (or its PostgreSQL store), or the reference
server's usage database read as it is, or the reference transit relay's, which gives the
`transit` table (migrate/reference.py maps their rows to ours; their row ids serve as ours,
and `import-reference` keeps them, so one dataset can follow an operator across the switch).

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

from pigeonhole.migrate import reference as ref
from pigeonhole.pipeline.config import ExportConfig
from pigeonhole.pipeline.dataset import (
    CURRENT_SCHEMA,
    SCHEMAS,
    TIME_COLUMNS,
    CommitResult,
    DatasetWriter,
    seconds_to_micros,
)

#: the exported tables and the columns copied, in the dataset's order
_COLUMNS = {name: schema.names for name, schema in SCHEMAS.items()}
#: usage.sqlite versions read, and the tables each has (v2 added `transit`)
_TABLES_BY_VERSION = {
    1: tuple(t for t in SCHEMAS if t != "transit"),
    2: tuple(SCHEMAS),
}


class ExportError(Exception):
    """The usage database cannot be exported (missing, or an unknown schema version)."""


def export_usage(config: ExportConfig) -> CommitResult:
    """Export every row newer than the dataset's cursor; return what became visible."""
    if config.store is None and not config.db_path.exists():
        raise ExportError(f"no usage database at {config.db_path}")
    writer = DatasetWriter(config.out_dir)
    writer.recover()
    cursor = writer.cursor()
    con: Any  # sqlite3.Connection, or PostgresReader (the same execute/fetch surface)
    if config.store is not None:
        con, queries, current_sql = _postgres(config.store)
    elif config.reference_transit:
        con, queries, current_sql = _reference_transit(config)
    elif config.reference:
        con, queries, current_sql = _reference(config)
    else:
        con, queries, current_sql = _pigeonhole(config)
    # Our database is in WAL mode: one read transaction is one snapshot of every table
    # and never blocks the server. The reference's is not (a reader holds off its
    # commits, which give up after 5 s), so there each statement reads one short page on
    # its own; its usage rows are only ever appended, so no snapshot is needed.
    snapshot = not (config.reference or config.reference_transit)
    read_rows = config.page_rows if snapshot else min(config.page_rows, REFERENCE_READ_ROWS)
    try:
        if snapshot:
            con.execute("BEGIN")
        for table, (sql, last_sql) in queries.items():
            # up to the last row now: rows that arrive meanwhile wait for the next run
            (last,) = con.execute(last_sql).fetchone()
            _check_cursor(config, table, cursor[table], last)
            pages = _pages(con, sql, table, (cursor[table], last or 0), config.page_rows, read_rows)
            for page in pages:
                writer.stage(table, page)
                cursor[table] = int(page.column("id")[-1].as_py())
        current = None if current_sql is None else _current(con, current_sql)
        if current is not None:
            writer.stage_current(current)
        if snapshot:
            con.execute("COMMIT")
    finally:
        con.close()
    return writer.commit(cursor)


#: rows per statement on the reference's database: a few milliseconds of its read lock
#: (they are gathered into pages of --page-rows: small pages would make many small files)
REFERENCE_READ_ROWS = 5_000
#: per exported table: (SELECT of a page of rows between two ids, SELECT of the last id)
Queries = dict[str, tuple[str, str]]
#: the SELECT of the `current` row, or None: the source has none
Current = str | None
_CURRENT = "SELECT rebooted, updated, blur_time, connections FROM current"


def _pigeonhole(config: ExportConfig) -> tuple[sqlite3.Connection, Queries, Current]:
    con = ref.open_read_only(config.db_path)
    try:
        tables = _check_version(con)
    except BaseException:
        con.close()
        raise
    return con, _queries("", tables), _CURRENT


def _queries(schema: str, tables: tuple[str, ...]) -> Queries:
    return {
        table: (
            f"SELECT {', '.join(_COLUMNS[table])} FROM {schema}{table}"
            " WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
            f"SELECT max(id) FROM {schema}{table}",
        )
        for table in tables
    }


def _postgres(url: str) -> tuple[Any, Queries, Current]:
    """The usage tables of a PostgreSQL store (schema `usage`: its postgres-v1.sql)."""
    from pigeonhole.pipeline.postgres_source import PostgresReader

    try:
        con = PostgresReader(url)
    except Exception as err:  # asyncpg's errors, OSError: cannot connect
        raise ExportError(f"cannot read the PostgreSQL store: {err}") from err
    try:
        con.execute("SELECT 1 FROM usage.current LIMIT 1")
        # schema version 4 added `usage.transit`; a store no newer node has opened lacks it
        found = con.execute("SELECT to_regclass('usage.transit') IS NOT NULL").fetchone()
        has_transit = found is not None and bool(found[0])
    except Exception as err:
        con.close()
        raise ExportError(f"not a Pigeonhole PostgreSQL store: {err}") from err
    return (
        con,
        _queries("usage.", _TABLES_BY_VERSION[2 if has_transit else 1]),
        "SELECT rebooted, updated, blur_time, connections FROM usage.current",
    )


def _reference(config: ExportConfig) -> tuple[sqlite3.Connection, Queries, Current]:
    """The reference's usage tables its version has (it keeps no connection counts)."""
    try:
        opened = ref.open_usage(config.db_path)
    except ref.ReferenceError as err:
        raise ExportError(str(err)) from err
    except sqlite3.Error as err:
        raise ExportError(f"{config.db_path}: {err}") from err
    queries = {
        table: (ref.usage_query(table, paged=True), f"SELECT max(rowid) FROM `{table}`")
        for table in ref.usage_tables(opened)
    }
    return opened.con, queries, ref.CURRENT_QUERY


def _reference_transit(config: ExportConfig) -> tuple[sqlite3.Connection, Queries, Current]:
    """The reference transit relay's `usage` rows, as our `transit` table."""
    try:
        opened = ref.open_transit_usage(config.db_path)
    except ref.ReferenceError as err:
        raise ExportError(str(err)) from err
    except sqlite3.Error as err:
        raise ExportError(f"{config.db_path}: {err}") from err
    return opened.con, {"transit": (ref.transit_query(paged=True), _LAST_ROWID)}, None


_LAST_ROWID = "SELECT max(rowid) FROM `usage`"


def _check_version(con: sqlite3.Connection) -> tuple[str, ...]:
    """The tables this usage database has, by its version; refuse unknown versions."""
    row = con.execute("SELECT version FROM version").fetchone()
    if row is None or row[0] not in _TABLES_BY_VERSION:
        raise ExportError(f"unsupported usage database version: {row and row[0]}")
    return _TABLES_BY_VERSION[row[0]]


def _check_cursor(config: ExportConfig, table: str, cursor: int, last: int | None) -> None:
    """A dataset whose cursor is past the database's last row came from another database."""
    if cursor > (last or 0):
        raise ExportError(
            f"{config.out_dir} was exported up to {table} id {cursor}, but {config.db_path}"
            f" ends at {last or 0}: it was made from another database; export to a new --out"
        )


def _pages(
    con: Any,
    sql: str,
    table: str,
    ids: tuple[int, int],
    page_rows: int,
    read_rows: int,
) -> Iterator[pa.Table]:
    """Pages of up to `page_rows` rows with ids in (after, last], read `read_rows` at a time."""
    after, last = ids
    buffered: list[tuple[Any, ...]] = []
    while True:
        rows = con.execute(sql, (after, last, read_rows)).fetchall()
        buffered += rows
        if buffered and (not rows or len(buffered) >= page_rows):
            yield _to_arrow(table, buffered)
            buffered = []
        if not rows:
            return
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


def _current(con: Any, sql: str) -> pa.Table | None:
    row = con.execute(sql).fetchone()
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
