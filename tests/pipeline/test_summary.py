"""The wide summary rows: counts by result, rates, timing and peaks, per app and for all."""

from __future__ import annotations

from typing import Any

import pytest

from pigeonhole.pipeline.concurrency import daily_peaks, hourly_peaks
from pigeonhole.pipeline.results import results_by_period
from pigeonhole.pipeline.schema import TABLES
from pigeonhole.pipeline.summary import summarize
from pigeonhole.pipeline.timing import timing_by_period

from .frames import DAY, A, B, sessions

NEXT, LAST = DAY.replace(day=19), DAY.replace(day=20)


@pytest.fixture(scope="module")
def daily(spark: Any) -> dict[tuple[Any, str | None], Any]:
    """daily_summary over 3 days: A (happy, scary, an unknown result), B (crowded), then
    an empty day, then one more A transfer; keyed by (day, app_id)."""
    frame = sessions(
        spark,
        [
            (A, "happy", 1.0, 2.0, 60.0),
            (A, "scary", 1.0, 2.0, 60.0),
            (A, "mystery", 3.0, 2.0, 9.0),
            (B, "crowded", 1.01, 2.0, 60.0),
            (A, "happy", 49.0, None, 60.0),
        ],
    )
    peaks = {"mail": hourly_peaks(frame, DAY, LAST)}
    table = summarize(
        results_by_period(frame, "day"),
        timing_by_period(frame, "day"),
        daily_peaks(peaks["mail"]),
        daily_peaks(peaks["mail"]),
        "day",
    )
    assert table.schema.names == TABLES["daily_summary"].names
    return {(r["day"], r["app_id"]): r for r in table.collect()}


def test_counts_and_rates_per_app(daily: dict[Any, Any]) -> None:
    """App A's day: 3 finished, 1 happy, 1 scary: success and scary rates of 1/3."""
    row = daily[(DAY, A)]
    assert (row["finished"], row["happy"], row["scary"]) == (3, 1, 1)
    assert row["success_rate"] == pytest.approx(1 / 3)
    assert row["scary_rate"] == pytest.approx(1 / 3)


def test_an_unknown_result_counts_as_other_never_as_happy(daily: dict[Any, Any]) -> None:
    """The result "mystery" is counted in `other` (and `finished`), not in any mood."""
    row = daily[(DAY, A)]
    assert row["other"] == 1
    assert row["happy"] + row["lonely"] + row["scary"] + row["other"] == row["finished"]


def test_all_apps_row_sums_counts_and_takes_the_joint_peak(daily: dict[Any, Any]) -> None:
    """All apps together: 4 finished, and A and B were open at the same time: peak 3."""
    row = daily[(DAY, None)]
    assert (row["finished"], row["crowded"], row["peak_mailboxes"]) == (4, 1, 3)
    assert row["crowded_rate"] == pytest.approx(1 / 4)
    assert (daily[(DAY, A)]["peak_mailboxes"], daily[(DAY, B)]["peak_mailboxes"]) == (2, 1)


def test_timing_percentiles_are_in_the_summary(daily: dict[Any, Any]) -> None:
    """Waiting p50 of A's day is 2 s over its 3 two-sided sessions; total p99 is 60 s."""
    row = daily[(DAY, A)]
    assert (row["waited"], row["waiting_p50"], row["total_p99"]) == (3, 2.0, 60.0)


def test_an_empty_day_has_zeros_and_no_rates(daily: dict[Any, Any]) -> None:
    """The idle middle day exists for all apps only, with zero counts and NULL rates."""
    assert (NEXT, A) not in daily
    row = daily[(NEXT, None)]
    assert (row["started"], row["finished"], row["peak_mailboxes"], row["waited"]) == (0, 0, 0, 0)
    assert (row["success_rate"], row["scary_rate"], row["waiting_p50"]) == (None, None, None)


def test_a_day_with_only_lonely_sessions_has_null_waiting(daily: dict[Any, Any]) -> None:
    """The last day's only transfer had one side: waited 0, waiting p50 NULL, total 60 s."""
    row = daily[(LAST, A)]
    assert (row["waited"], row["waiting_p50"], row["total_p50"]) == (0, None, 60.0)
