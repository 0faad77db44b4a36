"""`export-usage`: SQLite usage database -> day-partitioned Parquet, incremental and atomic."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from pigeonhole.cli.usage import export_usage as export_usage_command
from pigeonhole.pipeline import ExportConfig, ExportError, export_usage
from pigeonhole.pipeline.dataset import SCHEMAS, DatasetWriter

from .usage_db import add_client, add_mailbox, add_nameplate, add_sample, create_usage_db

DAY1 = 1_795_000_000.0 - 1_795_000_000.0 % 86400  # 2026-11-18 00:00 UTC
APP = "lothar.com/wormhole/text-or-file-xfer"


def _rows(root: Path, table: str) -> list[dict[str, object]]:
    data = pads.dataset(root / table, partitioning="hive", format="parquet").to_table()
    return sorted(data.to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type, return-value, unused-ignore]


def _files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    directory.mkdir()
    con = create_usage_db(directory / "usage.sqlite")
    add_mailbox(con, APP, DAY1 + 100.25, 5.5, 60.0, "happy")
    add_mailbox(con, APP, DAY1 + 86400 - 10, None, 30.0, "lonely", for_nameplate=False)
    add_mailbox(con, "other/app", DAY1 + 86400 + 5, 1.0, 2.0, "scary")
    add_nameplate(con, APP, DAY1 + 100.25, 5.5, 7.0, "happy")
    add_client(con, APP, "aaaa", DAY1 + 100.25, "python", "0.24.0")
    add_client(con, APP, "bbbb", DAY1 + 105.75, None, None)
    add_sample(con, DAY1 + 120, 4, 1)
    con.close()
    return directory


def _export(data_dir: Path, out: Path) -> tuple[str, ...]:
    return export_usage(ExportConfig(db_path=data_dir / "usage.sqlite", out_dir=out)).files


def test_rows_land_in_their_start_day_with_the_versioned_schema(
    data_dir: Path, tmp_path: Path
) -> None:
    """Each row is in day=<UTC date of its time column>, typed as the dataset schema says."""
    out = tmp_path / "out"
    _export(data_dir, out)
    days = sorted(p.name for p in (out / "mailboxes").iterdir())
    assert days == ["day=2026-11-18", "day=2026-11-19"]
    rows = _rows(out, "mailboxes")
    assert [(r["result"], str(r["day"])) for r in rows] == [
        ("happy", "2026-11-18"),
        ("lonely", "2026-11-18"),
        ("scary", "2026-11-19"),
    ]
    assert rows[0]["started"].timestamp() == DAY1 + 100.25  # type: ignore[attr-defined]
    assert rows[1]["waiting_time"] is None and rows[1]["for_nameplate"] is False
    one_file = next((out / "mailboxes" / "day=2026-11-18").glob("*.parquet"))
    schema = pq.read_schema(one_file)
    assert schema.remove_metadata().equals(SCHEMAS["mailboxes"].remove_metadata())
    assert schema.metadata[b"pigeonhole.version"] == b"1"


def test_every_table_and_current_are_exported(data_dir: Path, tmp_path: Path) -> None:
    """Nameplates, client versions (NULL versions kept), samples and `current` all arrive."""
    out = tmp_path / "out"
    _export(data_dir, out)
    assert [r["result"] for r in _rows(out, "nameplates")] == ["happy"]
    assert [r["implementation"] for r in _rows(out, "client_versions")] == ["python", None]
    assert [r["connections"] for r in _rows(out, "connection_counts")] == [4]
    current = pq.read_table(out / "current" / "current.parquet").to_pylist()
    assert current[0]["blur_time"] is None and current[0]["connections"] == 4
    assert (out / "_schema.json").exists()


def test_a_second_run_writes_nothing(data_dir: Path, tmp_path: Path) -> None:
    """Running the export again on an unchanged database creates and rewrites no file."""
    out = tmp_path / "out"
    assert _export(data_dir, out)
    before = _files(out)
    assert _export(data_dir, out) == ()
    assert _files(out) == before


def test_only_new_rows_are_exported(data_dir: Path, tmp_path: Path) -> None:
    """After new rows, the next run adds files holding exactly those rows."""
    out = tmp_path / "out"
    _export(data_dir, out)
    con = sqlite3.connect(data_dir / "usage.sqlite")
    add_mailbox(con, APP, DAY1 + 200, 1.0, 3.0, "errory")
    con.close()
    new = _export(data_dir, out)
    assert [f for f in new if f.startswith("mailboxes/")] == [
        "mailboxes/day=2026-11-18/part-000000000004-000000000004-until-2026-11-18.parquet"
    ]
    assert [r["id"] for r in _rows(out, "mailboxes")] == [1, 2, 3, 4]


def test_session_files_name_the_last_day_their_sessions_reach(
    data_dir: Path, tmp_path: Path
) -> None:
    """The lonely mailbox of 2026-11-18 ends 20 s into the 19th: its file says so; other
    tables' files carry no such day."""
    files = sorted(_export(data_dir, tmp_path / "out"))
    assert [f for f in files if f.startswith("mailboxes/")] == [
        "mailboxes/day=2026-11-18/part-000000000001-000000000003-until-2026-11-19.parquet",
        "mailboxes/day=2026-11-19/part-000000000001-000000000003-until-2026-11-19.parquet",
    ]
    assert [f for f in files if f.startswith("nameplates/")] == [
        "nameplates/day=2026-11-18/part-000000000001-000000000001-until-2026-11-18.parquet"
    ]
    assert all("-until-" not in f for f in files if f.startswith("client_versions/"))


def test_an_uncommitted_run_leaves_nothing_visible(data_dir: Path, tmp_path: Path) -> None:
    """Files staged by a run that died before its commit are never published, then dropped."""
    out = tmp_path / "out"
    writer = DatasetWriter(out)
    writer.stage("mailboxes", pq.read_table(_first_file(data_dir, tmp_path)))
    assert not (out / "mailboxes").exists()
    _export(data_dir, out)
    assert [r["id"] for r in _rows(out, "mailboxes")] == [1, 2, 3]
    assert not (out / "_export" / "staging").exists()


def test_a_crash_while_publishing_is_completed_by_the_next_run(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that dies after its journal, between renames, is finished: every row once."""
    out = tmp_path / "out"
    real_replace = os.replace
    calls = {"n": 0}

    def failing_replace(src: object, dst: object) -> None:
        if str(dst).endswith(".parquet"):
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError("power cut")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="power cut"):
        _export(data_dir, out)
    monkeypatch.setattr(os, "replace", real_replace)
    assert _export(data_dir, out) == ()  # nothing new: the journal completed the batch
    assert [r["id"] for r in _rows(out, "mailboxes")] == [1, 2, 3]
    assert [r["id"] for r in _rows(out, "client_versions")] == [1, 2]


def test_export_is_safe_while_the_server_writes(data_dir: Path, tmp_path: Path) -> None:
    """Exports racing a WAL writer see consistent snapshots: in the end every row, once."""
    out, stop = tmp_path / "out", threading.Event()

    def server() -> None:
        con = sqlite3.connect(data_dir / "usage.sqlite")
        con.execute("PRAGMA journal_mode=WAL")
        for i in range(400):
            add_mailbox(con, APP, DAY1 + 1000 + i, 1.0, 2.0, "happy")
        con.close()
        stop.set()

    writer = threading.Thread(target=server)
    writer.start()
    runs = 0
    while not stop.is_set() or runs == 0:
        _export(data_dir, out)
        runs += 1
    writer.join()
    _export(data_dir, out)
    assert [r["id"] for r in _rows(out, "mailboxes")] == list(range(1, 404))


def test_an_unknown_database_version_is_refused(data_dir: Path, tmp_path: Path) -> None:
    """A usage database of another schema version is not exported (no guessing)."""
    con = sqlite3.connect(data_dir / "usage.sqlite")
    con.execute("UPDATE version SET version = 9")
    con.commit()
    con.close()
    with pytest.raises(ExportError, match="version: 9"):
        _export(data_dir, tmp_path / "out")


def test_cli_exports_and_reports_what_it_did(data_dir: Path, tmp_path: Path) -> None:
    """`export-usage --data-dir DIR --out DIR` exports and says how far each table got."""
    result = CliRunner().invoke(
        export_usage_command, ["--data-dir", str(data_dir), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert "mailboxes up to id 3" in result.output


def test_cli_without_a_database_fails_cleanly(tmp_path: Path) -> None:
    """A data directory without usage.sqlite is a clear error, not a traceback."""
    result = CliRunner().invoke(
        export_usage_command, ["--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    assert "no usage database" in result.output


def _first_file(data_dir: Path, tmp_path: Path) -> Path:
    scratch = tmp_path / "scratch"
    _export(data_dir, scratch)
    return next((scratch / "mailboxes").rglob("*.parquet"))
