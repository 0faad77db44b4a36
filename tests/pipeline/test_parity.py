"""Parity: the Spark tables agree with an independent DuckDB computation of the metrics.

Counts and peaks must agree exactly. Percentiles are compared with DuckDB's exact
`quantile_disc`; below percentile_approx's accuracy (10,000 values a group) they are exact
too, which is the case for these few thousand rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.pipeline.report_run import ReportRun

from .duckdb_reference import all_metrics, connect, transit

PCT = (50, 90, 99)


@pytest.fixture(scope="module")
def reference(report_run: ReportRun) -> dict[str, list[dict[str, Any]]]:
    days = [r["day"] for r in _spark(report_run, "daily_summary")]
    metrics = all_metrics(connect(str(report_run.data)), min(days), max(days))
    return {name: _rows(relation.to_arrow_table()) for name, relation in metrics.items()}


def _rows(table: Any) -> list[dict[str, Any]]:
    return table.to_pylist()  # type: ignore[no-any-return]


def _spark(run: ReportRun, name: str) -> list[dict[str, Any]]:
    table = pads.dataset(run.out / "tables" / name, format="parquet", partitioning="hive")
    rows = _rows(table.to_table())
    for row in rows:  # the hive partition value comes back as a string
        row["day"] = dt.date.fromisoformat(str(row["day"]))
    return rows


def _keyed(
    rows: list[dict[str, Any]], key: tuple[str, ...], values: tuple[str, ...]
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {tuple(r[k] for k in key): tuple(r[v] for v in values) for r in rows}


@pytest.mark.parametrize(
    "name",
    ["daily_results", "hourly_results", "daily_nameplate_results", "hourly_nameplate_results"],
)
def test_result_counts_agree(report_run: ReportRun, reference: dict[str, Any], name: str) -> None:
    """Started and finished counts by day/hour, app and result are identical."""
    key = (
        ("day", "hour", "app_id", "result")
        if name.startswith("hourly")
        else ("day", "app_id", "result")
    )
    values = ("count", "started_count")
    days = {r["day"] for r in _spark(report_run, name)}
    expected = {
        k: v
        for k, v in _keyed(reference[name], key, values).items()
        if min(days) <= k[0] <= max(days)
    }
    assert _keyed(_spark(report_run, name), key, values) == expected


@pytest.mark.parametrize(
    ("table", "column", "reference_name"),
    [
        ("hourly_summary", "peak_mailboxes", "mailbox_peaks"),
        ("hourly_summary", "peak_nameplates", "nameplate_peaks"),
    ],
)
def test_hourly_peaks_agree(
    report_run: ReportRun, reference: dict[str, Any], table: str, column: str, reference_name: str
) -> None:
    """Every hourly peak, per app and for all apps, is identical."""
    key = ("day", "hour", "app_id")
    spark_peaks = {
        k: v
        for k, v in _keyed(_spark(report_run, table), key, (column,)).items()
        if v[0] > 0 or k[2] is None
    }
    assert spark_peaks == _keyed(reference[reference_name], key, ("peak",))
    assert max(v[0] for v in spark_peaks.values()) >= 3


@pytest.mark.parametrize("grain", ["daily", "hourly"])
def test_percentiles_agree(report_run: ReportRun, reference: dict[str, Any], grain: str) -> None:
    """waited and the p50/p90/p99 of waiting and total time match DuckDB's exact values."""
    key = ("day", "hour", "app_id") if grain == "hourly" else ("day", "app_id")
    spark_rows = _spark(report_run, f"{grain}_summary")
    got = {
        k: v
        for k, v in _keyed(
            spark_rows,
            key,
            (
                "waited",
                "waiting_p50",
                "waiting_p90",
                "waiting_p99",
                "total_p50",
                "total_p90",
                "total_p99",
            ),
        ).items()
        if v[4] is not None
    }
    expected = {
        tuple(r[k] for k in key): (r["waited"], *(r["waiting"] or [None] * 3), *r["total"])
        for r in reference[f"{grain}_timing"]
    }
    assert got == {k: v for k, v in expected.items() if k in got}
    days = {k[0] for k in got}
    assert len(got) == len([k for k in expected if min(days) <= k[0] <= max(days)])


@pytest.mark.parametrize("name", ["daily_clients", "hourly_clients", "hourly_connections"])
def test_clients_and_connections_agree(
    report_run: ReportRun, reference: dict[str, Any], name: str
) -> None:
    """Client binds and sides, and the hourly connection maxima, are identical."""
    rows = _spark(report_run, name)
    columns = [
        "day",
        *(
            c
            for c in rows[0]
            if c not in ("day", "binds", "sides", "samples") and not c.startswith("max_")
        ),
    ]
    values = tuple(c for c in rows[0] if c not in columns)
    days = {r["day"] for r in rows}
    expected = {
        k: v
        for k, v in _keyed(reference[name], tuple(columns), values).items()
        if min(days) <= k[0] <= max(days)
    }
    assert _keyed(rows, tuple(columns), values) == expected


def test_the_transit_day_agrees(report_run: ReportRun) -> None:
    """Every daily_transit row (both report runs) equals DuckDB's over the whole dataset:
    counts by mood, bytes, the pairs' exact percentiles and the peak of pairs."""
    rows = sorted(_spark(report_run, "daily_transit"), key=lambda r: r["day"])
    days = [r["day"] for r in rows]
    assert days == [days[0] + dt.timedelta(days=i) for i in range(len(days))]
    con = connect(str(report_run.data))
    expected = _rows(transit(con, days[0], days[-1]).to_arrow_table())
    flat = [
        {
            **{k: v for k, v in r.items() if k not in ("waiting", "total")},
            **{f"waiting_p{p}": (r["waiting"] or [None] * 3)[i] for i, p in enumerate(PCT)},
            **{f"total_p{p}": (r["total"] or [None] * 3)[i] for i, p in enumerate(PCT)},
        }
        for r in expected
    ]
    assert rows == flat
    assert sum(r["pairs"] for r in rows) > 1000 and max(r["peak_pairs"] for r in rows) >= 2
    assert all(r["bytes"] > 0 for r in rows if r["pairs"])
