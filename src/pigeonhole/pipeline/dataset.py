"""The usage dataset on disk: a versioned Parquet layout partitioned by day, and its writer.

This is the contract between the exporter (and `demo-data`) and the Spark report. Layout::

    ROOT/_schema.json                         format name, version, every column with its doc
    ROOT/<table>/day=YYYY-MM-DD/part-<first id>-<last id>.parquet            other tables
    ROOT/<table>/day=YYYY-MM-DD/part-<first id>-<last id>-until-YYYY-MM-DD.parquet
                                              sessions: `until` is the last day one reaches
    ROOT/current/current.parquet              the one-row `current` table, replaced whole
    ROOT/_export/cursor.json                  last exported id of each table
    ROOT/_export/staging/                     only during a run (Spark ignores `_` names)

`day` is the UTC date of the table's time column. A session file names the last UTC day
any of its sessions is still open in (the day of `started + total_time`), so the report
plans an incremental run from the file listing alone, without reading the files. Files
are immutable once renamed into place; a batch becomes visible through a journal (write,
fsync, rename), so a crash leaves either no new file or a journal that the next run
completes: never a half-written file and never a row twice.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]

from pigeonhole.durable import fsync_path

FORMAT_NAME = "pigeonhole-usage"
#: Bump on any incompatible change; readers refuse versions they do not know.
SCHEMA_VERSION = 1
DAY_US = 86_400_000_000
_TS = pa.timestamp("us", tz="UTC")


def _field(name: str, kind: pa.DataType, nullable: bool, doc: str) -> pa.Field:
    return pa.field(name, kind, nullable=nullable, metadata={"doc": doc})


#: The exported tables, their Arrow schemas (column docs in field metadata).
SCHEMAS: Mapping[str, pa.Schema] = {
    "nameplates": pa.schema(
        [
            _field("id", pa.int64(), False, "row id in usage.sqlite (export cursor)"),
            _field("app_id", pa.string(), False, "the AppID the clients bound with"),
            _field("started", _TS, False, "first claim (blurred when --blur-usage is set)"),
            _field(
                "waiting_time",
                pa.float64(),
                True,
                "seconds from the first claim to the second; NULL if only one side came",
            ),
            _field("total_time", pa.float64(), False, "seconds from the first claim to deletion"),
            _field("result", pa.string(), False, "happy | lonely | pruney | crowded"),
        ]
    ),
    "mailboxes": pa.schema(
        [
            _field("id", pa.int64(), False, "row id in usage.sqlite (export cursor)"),
            _field("app_id", pa.string(), False, "the AppID"),
            _field(
                "for_nameplate", pa.bool_(), False, "made by a nameplate claim (not a bare open)"
            ),
            _field("started", _TS, False, "first side's arrival (blurred)"),
            _field(
                "waiting_time",
                pa.float64(),
                True,
                "seconds until the second side arrived; NULL if only one side came",
            ),
            _field("total_time", pa.float64(), False, "seconds from the first arrival to deletion"),
            _field(
                "result",
                pa.string(),
                False,
                "quiet | happy | lonely | errory | scary | pruney | crowded",
            ),
        ]
    ),
    "client_versions": pa.schema(
        [
            _field("id", pa.int64(), False, "row id in usage.sqlite (export cursor)"),
            _field("app_id", pa.string(), False, "the AppID"),
            _field("side", pa.string(), False, "the client's side (random per wormhole)"),
            _field("connect_time", _TS, False, "time of the bind (blurred)"),
            _field("implementation", pa.string(), True, "client_version[0]; NULL if not sent"),
            _field("version", pa.string(), True, "client_version[1]; NULL if not sent"),
        ]
    ),
    "connection_counts": pa.schema(
        [
            _field("id", pa.int64(), False, "row id in usage.sqlite (export cursor)"),
            _field("sampled", _TS, False, "sample time (blurred)"),
            _field("connections", pa.int64(), False, "open WebSocket connections"),
            _field("bound", pa.int64(), False, "connections that have sent `bind`"),
            _field("subscribed", pa.int64(), False, "connections with an open mailbox"),
            _field("nameplates", pa.int64(), False, "nameplates alive"),
            _field("mailboxes", pa.int64(), False, "mailboxes alive"),
        ]
    ),
    "transit": pa.schema(
        [
            _field("id", pa.int64(), False, "row id in usage.sqlite (export cursor)"),
            _field(
                "started",
                _TS,
                False,
                "connect time (blurred); for a pair, of the side whose end recorded it",
            ),
            _field(
                "total_time", pa.float64(), False, "seconds from the first connect to last close"
            ),
            _field(
                "waiting_time",
                pa.float64(),
                True,
                "seconds between the two sides' connects; NULL if never paired",
            ),
            _field(
                "total_bytes",
                pa.int64(),
                False,
                "bytes relayed, both directions (rounded up when blurred)",
            ),
            _field(
                "result",
                pa.string(),
                False,
                "happy | jilted | lonely | redundant | errory | impatient | empty",
            ),
        ]
    ),
}
#: tables of sessions (with `started` and `total_time`; a transit record is one too)
SESSION_TABLES = ("mailboxes", "nameplates", "transit")
#: The column each table is partitioned by (its UTC date becomes `day`).
TIME_COLUMNS: Mapping[str, str] = {
    "nameplates": "started",
    "mailboxes": "started",
    "client_versions": "connect_time",
    "connection_counts": "sampled",
    "transit": "started",
}
CURRENT_SCHEMA = pa.schema(
    [
        _field("rebooted", _TS, False, "server start time (blurred)"),
        _field("updated", _TS, False, "last sample time"),
        _field("blur_time", pa.int64(), True, "--blur-usage seconds; NULL if not blurred"),
        _field("connections", pa.int64(), False, "open WebSocket connections at the last sample"),
    ]
)


def describe() -> dict[str, Any]:
    """The content of `_schema.json`: what a reader needs to check and understand the data."""
    tables = {**SCHEMAS, "current": CURRENT_SCHEMA}
    return {
        "format": FORMAT_NAME,
        "version": SCHEMA_VERSION,
        "partitioning": {name: f"day=<UTC date of {col}>" for name, col in TIME_COLUMNS.items()},
        "tables": {
            name: [
                {
                    "name": f.name,
                    "type": str(f.type),
                    "nullable": f.nullable,
                    "doc": (f.metadata or {}).get(b"doc", b"").decode(),
                }
                for f in schema
            ]
            for name, schema in tables.items()
        },
    }


def session_end_days(rows: pa.Table) -> np.ndarray:
    """Day number (since 1970-01-01) of each session's end, `started + total_time`,
    computed as the report computes it (`periods.to_sessions`): whole microseconds, floor."""
    started = rows.column("started").cast(pa.int64()).to_numpy()
    total = rows.column("total_time").to_numpy(zero_copy_only=False)
    end = started + np.floor(total * 1_000_000).astype(np.int64)
    days: np.ndarray = np.maximum(end, started) // DAY_US
    return days


def _label(day: int) -> str:
    return str(np.datetime_as_string(np.datetime64(day, "D")))


def seconds_to_micros(values: np.ndarray) -> np.ndarray:
    """UNIX seconds (REAL, as SQLite keeps them) to integer microseconds, rounded."""
    return np.rint(np.asarray(values, dtype=np.float64) * 1e6).astype(np.int64)


@dataclass(frozen=True)
class CommitResult:
    """What one `DatasetWriter.commit` made visible (paths relative to the root)."""

    files: tuple[str, ...]
    cursor: Mapping[str, int]


class DatasetWriter:
    """Stage Parquet files for one run, then make them visible atomically in `commit`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._state = root / "_export"
        self._staging = self._state / "staging"
        self._moves: list[tuple[str, str]] = []

    def recover(self) -> None:
        """Finish a committed run that crashed while renaming, or drop an uncommitted one."""
        journal = self._staging / "journal.json"
        if journal.exists():
            plan = json.loads(journal.read_text())
            self._apply(plan["moves"], plan["cursor"])
        if self._staging.exists():
            shutil.rmtree(self._staging)
        self._moves = []

    def cursor(self) -> dict[str, int]:
        """The last exported id of each table (0 for a table never exported)."""
        path = self._state / "cursor.json"
        saved = json.loads(path.read_text()) if path.exists() else {}
        return {name: int(saved.get(name, 0)) for name in SCHEMAS}

    def stage(self, table: str, rows: pa.Table) -> None:
        """Stage one batch of `table` rows (any days), one file per day."""
        if rows.num_rows == 0:
            return
        rows = rows.select(SCHEMAS[table].names).cast(SCHEMAS[table])
        ids = rows.column("id").to_numpy()
        name = f"part-{int(ids.min()):012d}-{int(ids.max()):012d}.parquet"
        micros = rows.column(TIME_COLUMNS[table]).cast(pa.int64()).to_numpy()
        days = micros // DAY_US
        ends = session_end_days(rows) if table in SESSION_TABLES else None
        for day in np.unique(days):
            mine = days == day
            part = rows.filter(pa.array(mine))
            label = _label(int(day))
            until = "" if ends is None else f"-until-{_label(int(ends[mine].max()))}"
            self._stage_file(part, f"{table}/day={label}/{name[:-8]}{until}.parquet")

    def stage_current(self, row: pa.Table) -> None:
        """Stage the `current` table unless it equals the one already published."""
        row = row.cast(CURRENT_SCHEMA)
        published = self.root / "current" / "current.parquet"
        if published.exists() and pq.read_table(published).cast(CURRENT_SCHEMA).equals(row):
            return
        self._stage_file(row, "current/current.parquet")

    def commit(self, cursor: Mapping[str, int]) -> CommitResult:
        """Publish the staged files and the new cursor; a no-op when nothing was staged."""
        self._write_schema_file()
        if not self._moves:
            return CommitResult(files=(), cursor=dict(cursor))
        plan: dict[str, Any] = {"moves": self._moves, "cursor": dict(cursor)}
        _atomic_write(self._staging / "journal.json", json.dumps(plan).encode())
        self._apply(plan["moves"], plan["cursor"])
        shutil.rmtree(self._staging)
        files = tuple(final for _, final in self._moves)
        self._moves = []
        return CommitResult(files=files, cursor=dict(cursor))

    def _stage_file(self, table: pa.Table, final: str) -> None:
        staged = f"{len(self._moves):06d}.parquet"
        self._staging.mkdir(parents=True, exist_ok=True)
        meta = {
            b"pigeonhole.format": FORMAT_NAME.encode(),
            b"pigeonhole.version": str(SCHEMA_VERSION).encode(),
        }
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
        pq.write_table(table, self._staging / staged, compression="zstd")
        fsync_path(self._staging / staged)
        self._moves.append((staged, final))

    def _apply(self, moves: list[tuple[str, str]], cursor: Mapping[str, int]) -> None:
        dirs: set[Path] = set()
        for staged, final in moves:
            source, target = self._staging / staged, self.root / final
            if source.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source, target)
                dirs.add(target.parent)
        for directory in dirs:
            fsync_path(directory)
        _atomic_write(self._state / "cursor.json", json.dumps(dict(cursor)).encode())

    def _write_schema_file(self) -> None:
        path = self.root / "_schema.json"
        content = json.dumps(describe(), indent=2).encode()
        if not path.exists() or path.read_bytes() != content:
            _atomic_write(path, content)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)
