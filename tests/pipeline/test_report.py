"""`report`: tables and page written, progress shown, later runs touch only new days."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from pigeonhole.cli.usage import report
from pigeonhole.pipeline.schema import TABLES
from tests.pipeline.report_run import ReportRun


def _table(run: ReportRun, name: str) -> Any:
    return pads.dataset(run.out / "tables" / name, format="parquet", partitioning="hive").to_table()


def test_every_table_is_written_with_its_documented_columns(report_run: ReportRun) -> None:
    """Each table in schema.TABLES exists under tables/NAME/ with exactly its columns."""
    for name, schema in TABLES.items():
        columns = set(_table(report_run, name).column_names)
        assert columns == set(schema.names), name


def test_daily_results_has_the_contract_columns(report_run: ReportRun) -> None:
    """tables/daily_results/ has day, app_id, result and count, one row per combination."""
    rows = _table(report_run, "daily_results").to_pylist()
    assert {"day", "app_id", "result", "count"} <= set(rows[0])
    keys = [(str(r["day"]), r["app_id"], r["result"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert sum(r["count"] for r in rows) == 3750  # every demo transfer finished exactly once


def test_progress_is_shown_step_by_step(report_run: ReportRun) -> None:
    """The run prints numbered steps while Spark works, then what it recomputed."""
    assert "[1/13] checking the input and planning" in report_run.first_output
    assert "[13/13] drawing the report page" in report_run.first_output
    assert re.search(r"recomputed 2026-11-07 to 2026-11-1[89] ", report_run.first_output)


def test_a_later_run_recomputes_only_the_new_days(report_run: ReportRun) -> None:
    """The second run starts at the first new day; files of earlier days stay as they were."""
    assert re.search(r"recomputed 2026-11-19 to 2026-11-2[12] ", report_run.second_output)
    tables = report_run.out / "tables"
    kept = {
        r: m
        for r, m in report_run.before_second.items()
        if not r.startswith("anomalies") and "day=2026-11-19" not in r
    }
    assert len(kept) > 100
    assert {r: (tables / r).stat().st_mtime for r in kept} == kept
    assert (tables / "daily_summary" / "day=2026-11-21").is_dir()


def test_the_page_is_one_self_contained_file(report_run: ReportRun) -> None:
    """index.html embeds its 7 PNG charts and loads nothing from elsewhere."""
    page = (report_run.out / "index.html").read_text()
    assert page.count('src="data:image/png;base64,') == 7
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_the_page_has_the_transit_relays_days(report_run: ReportRun) -> None:
    """The relay's section: its totals line and a table of the latest 14 days."""
    page = (report_run.out / "index.html").read_text()
    section = page[page.index("<h2>Transit relay</h2>") :]
    section = section[: section.index("<h2>", 5)]
    assert "pairs relayed" in section and "GB relayed" in section
    assert section.count("<tr>") == 1 + 14


def test_a_directory_that_is_not_a_dataset_is_refused(spark: Any, tmp_path: Path) -> None:
    """`report` on a directory without _schema.json fails with a clear message."""
    result = CliRunner().invoke(
        report, ["--input", str(tmp_path), "--output", str(tmp_path / "out"), "--quiet"]
    )
    assert result.exit_code == 1
    assert "not a pigeonhole usage dataset" in result.output


def test_a_bad_conf_option_is_a_usage_error(tmp_path: Path) -> None:
    """--conf needs KEY=VALUE."""
    result = CliRunner().invoke(
        report, ["--input", str(tmp_path), "--output", str(tmp_path), "--conf", "nonsense"]
    )
    assert result.exit_code == 2
    assert "KEY=VALUE" in result.output


@pytest.mark.parametrize("table", ["daily_summary", "hourly_summary"])
def test_summaries_have_an_all_apps_row_for_every_period(report_run: ReportRun, table: str) -> None:
    """Charts can rely on one all-apps row per day (and per hour) of the whole range."""
    rows = [r for r in _table(report_run, table).to_pylist() if r["app_id"] is None]
    days = {dt.date.fromisoformat(str(r["day"])) for r in rows}
    assert len(days) == (max(days) - min(days)).days + 1
    assert len(rows) == len(days) * (24 if table == "hourly_summary" else 1)


def test_an_empty_dataset_gives_an_empty_report(spark: Any, tmp_path: Path) -> None:
    """A server that recorded nothing yet still gets a page (saying so) and no error."""
    from pigeonhole.pipeline import ExportConfig, export_usage

    from .usage_db import create_usage_db

    create_usage_db(tmp_path / "usage.sqlite").close()
    export_usage(ExportConfig(db_path=tmp_path / "usage.sqlite", out_dir=tmp_path / "data"))
    result = CliRunner().invoke(
        report, ["--input", str(tmp_path / "data"), "--output", str(tmp_path / "out"), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert "no new input" in result.output
    assert "no data yet" in (tmp_path / "out" / "index.html").read_text()
