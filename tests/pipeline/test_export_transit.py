"""`export-usage`'s transit table: from usage.sqlite v2, from a v1 file (no transit yet),
and from the reference transit relay's own usage database (a PostgreSQL store's:
tests/server/test_server_transit_usage.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from pigeonhole.cli.usage import export_usage as export_usage_command
from pigeonhole.pipeline import ExportConfig, ExportError, export_usage
from tests.support.relay_usage import relay_usage_db

from .usage_db import add_mailbox, add_transit, create_usage_db

DAY1 = 1_795_000_000.0 - 1_795_000_000.0 % 86400  # 2026-11-18 00:00 UTC
COLUMNS = ("id", "total_time", "waiting_time", "total_bytes", "result")


def _rows(root: Path) -> list[dict[str, object]]:
    data = pads.dataset(root / "transit", partitioning="hive", format="parquet").to_table()
    return sorted(data.to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type, return-value, unused-ignore]


def _values(root: Path) -> list[tuple[object, ...]]:
    return [tuple(r[c] for c in COLUMNS) for r in _rows(root)]


def _started(root: Path) -> list[float]:
    return [r["started"].timestamp() for r in _rows(root)]  # type: ignore[attr-defined]


def test_transit_rows_are_sessions_named_by_their_last_day(tmp_path: Path) -> None:
    """A pair that lasts past midnight lands in its start day, its file naming the next;
    a second run adds only the rows written since."""
    db = tmp_path / "usage.sqlite"
    con = create_usage_db(db, version=2)
    add_transit(con, DAY1 + 86_390, 20.5, 0.25, 52_428_800, "happy")
    add_transit(con, DAY1 + 100, 30.0, None, 0, "lonely")
    out = tmp_path / "out"
    files = export_usage(ExportConfig(db_path=db, out_dir=out)).files
    assert sorted(f for f in files if f.startswith("transit/")) == [
        "transit/day=2026-11-18/part-000000000001-000000000002-until-2026-11-19.parquet"
    ]
    assert _values(out) == [(1, 20.5, 0.25, 52_428_800, "happy"), (2, 30.0, None, 0, "lonely")]
    assert _started(out) == [DAY1 + 86_390, DAY1 + 100]
    add_transit(con, DAY1 + 86_400 + 7, 1.0, None, 0, "errory")
    con.close()
    again = export_usage(ExportConfig(db_path=db, out_dir=out)).files
    assert [f for f in again if f.startswith("transit/")] == [
        "transit/day=2026-11-19/part-000000000003-000000000003-until-2026-11-19.parquet"
    ]
    assert [r["id"] for r in _rows(out)] == [1, 2, 3]


def test_a_version_1_usage_database_exports_without_transit(tmp_path: Path) -> None:
    db = tmp_path / "usage.sqlite"
    con = create_usage_db(db, version=1)
    add_mailbox(con, "app", DAY1 + 5, 1.0, 2.0, "happy")
    con.close()
    result = export_usage(ExportConfig(db_path=db, out_dir=tmp_path / "out"))
    assert result.cursor["transit"] == 0 and result.cursor["mailboxes"] == 1
    assert not (tmp_path / "out" / "transit").exists()


def test_the_reference_relays_usage_database_exports_as_transit(tmp_path: Path) -> None:
    """The relay's rows, with its row ids as ours; a row the relay left without a result
    is left out; the relay's file is not changed."""
    db = tmp_path / "relay-usage.sqlite"
    relay_usage_db(
        db,
        [
            (DAY1 + 60, 12, 3, 20_000_000, "happy"),
            (DAY1 + 120, 30, None, 0, "lonely"),
            (DAY1 + 130, 1, None, 0, None),  # type: ignore[list-item]
            (DAY1 + 140, 0, None, 0, "errory"),
        ],
    )
    before = db.read_bytes()
    out = tmp_path / "out"
    result = CliRunner().invoke(
        export_usage_command, ["--reference-transit-usage-db", str(db), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert _values(out) == [
        (1, 12.0, 3.0, 20_000_000, "happy"),
        (2, 30.0, None, 0, "lonely"),
        (4, 0.0, None, 0, "errory"),
    ]
    assert db.read_bytes() == before
    assert not (out / "mailboxes").exists()


def test_a_file_that_is_not_the_relays_usage_database_is_refused(tmp_path: Path) -> None:
    """Our own usage file (version 1, like the relay's) has no relay `usage` table."""
    db = tmp_path / "usage.sqlite"
    create_usage_db(db, version=1).close()
    with pytest.raises(ExportError, match="not a reference transit relay usage database"):
        export_usage(ExportConfig(db_path=db, out_dir=tmp_path / "out", reference_transit=True))
