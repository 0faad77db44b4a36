"""Peak concurrency per hour: exact at hour and day boundaries, per app and for all apps."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pigeonhole.pipeline.concurrency import daily_peaks, hourly_peaks

from .frames import DAY, A, B, sessions

pytestmark = pytest.mark.usefixtures("spark")
NEXT = DAY.replace(day=19)


def _peaks(
    spark: Any,
    rows: list[tuple[str, str, float, float | None, float]],
    first: Any = DAY,
    last: Any = DAY,
    app: str | None = None,
) -> dict[int, int]:
    """hour -> peak of one scope (None: all apps), for a one-day range."""
    frame = hourly_peaks(sessions(spark, rows), first, last)
    scope = frame.where("app_id IS NULL") if app is None else frame.where(f"app_id = '{app}'")
    return {r["hour"]: r["peak"] for r in scope.collect() if r["day"] == first}


def test_overlapping_sessions_peak_where_they_overlap(spark: Any) -> None:
    """Two of three sessions overlap inside hour 10: its peak is 2, later hours 0."""
    peaks = _peaks(
        spark,
        [
            (A, "happy", 10.0, 1.0, 1200.0),
            (A, "happy", 10.25, 1.0, 600.0),
            (A, "happy", 10.75, 1.0, 60.0),
        ],
    )
    assert peaks[10] == 2 and peaks[11] == 0 and peaks[9] == 0
    assert len(peaks) == 24


def test_back_to_back_sessions_do_not_overlap(spark: Any) -> None:
    """A session ending at the instant the next starts: they never count together."""
    peaks = _peaks(spark, [(A, "happy", 3.0, 1.0, 1800.0), (A, "happy", 3.5, 1.0, 600.0)])
    assert peaks[3] == 1


def test_an_hour_where_sessions_only_end_reports_the_carried_level(spark: Any) -> None:
    """Sessions open since hour 10 and ending in hour 12 make hours 11 and 12 peak at 2."""
    peaks = _peaks(spark, [(A, "happy", 10.5, 1.0, 6300.0), (A, "happy", 10.6, 1.0, 6300.0)])
    assert (peaks[10], peaks[11], peaks[12], peaks[13]) == (2, 2, 2, 0)


def test_a_session_across_midnight_counts_on_both_days(spark: Any) -> None:
    """A session from 23:00 to 01:00 is open in hour 23 and in the next day's hour 0."""
    frame = hourly_peaks(sessions(spark, [(A, "pruney", 23.0, None, 7200.0)]), DAY, NEXT)
    open_hours = {
        (r["day"], r["hour"]) for r in frame.where("app_id IS NULL").collect() if r["peak"] > 0
    }
    assert open_hours == {(DAY, 23), (NEXT, 0)}


def test_a_session_before_the_range_still_counts_inside_it(spark: Any) -> None:
    """Reporting only the next day, a session started the day before is carried in."""
    assert _peaks(spark, [(A, "pruney", 22.0, None, 4 * 3600.0)], NEXT, NEXT)[1] == 1


def test_an_empty_day_has_zero_peaks_for_all_apps_and_no_app_rows(spark: Any) -> None:
    """Every hour of an idle day appears for all apps with 0, and no app appears."""
    frame = hourly_peaks(sessions(spark, [(A, "happy", 1.0, 1.0, 60.0)]), DAY, NEXT)
    idle = frame.where(f"day = DATE'{NEXT}'")
    assert idle.where("app_id IS NOT NULL").count() == 0
    assert sorted(r["peak"] for r in idle.collect()) == [0] * 24


def test_apps_peak_separately_and_together(spark: Any) -> None:
    """A and B overlap: each app peaks at 1 and all apps together at 2."""
    rows = [(A, "happy", 5.0, 1.0, 600.0), (B, "happy", 5.05, 1.0, 600.0)]
    frame = hourly_peaks(sessions(spark, rows), DAY, DAY).where("hour = 5")
    assertDataFrameEqual(
        frame,
        [
            Row(day=DAY, hour=5, app_id=A, peak=1),
            Row(day=DAY, hour=5, app_id=B, peak=1),
            Row(day=DAY, hour=5, app_id=None, peak=2),
        ],
    )


def test_daily_peak_is_the_highest_hour(spark: Any) -> None:
    """The day's peak is the maximum of its hourly peaks."""
    rows = [
        (A, "happy", 5.0, 1.0, 600.0),
        (A, "happy", 5.05, 1.0, 600.0),
        (A, "happy", 9.0, 1.0, 60.0),
    ]
    days = daily_peaks(hourly_peaks(sessions(spark, rows), DAY, DAY))
    assertDataFrameEqual(days, [Row(day=DAY, app_id=A, peak=2), Row(day=DAY, app_id=None, peak=2)])


def test_random_sessions_match_a_brute_force_count(spark: Any) -> None:
    """On 300 random sessions over two days, every hourly peak equals a direct count."""
    rng = random.Random(7)
    rows: list[tuple[str, str, float, float | None, float]] = []
    for _ in range(300):
        start = rng.choice([rng.uniform(0, 47), float(rng.randint(0, 47))])  # some on the hour
        length = rng.choice([rng.uniform(0, 600), rng.uniform(0, 3 * 3600), 3600.0, 0.0])
        rows.append((rng.choice([A, B]), "happy", start, None, length))
    frame = hourly_peaks(sessions(spark, rows), DAY, NEXT).where("app_id IS NULL")
    got = {(r["day"], r["hour"]): r["peak"] for r in frame.collect()}
    assert got == _brute_force(rows)


def _brute_force(rows: list[tuple[str, str, float, float | None, float]]) -> dict[Any, int]:
    """Peak per hour by checking the level at the hour start and at every start in the hour."""
    spans = [(round(s * 3600e6), round(s * 3600e6) + int(t * 1e6)) for _, _, s, _, t in rows]
    peaks = {}
    for h in range(48):
        lo, hi = h * 3600_000_000, (h + 1) * 3600_000_000
        instants = [lo] + [a for a, _ in spans if lo <= a < hi]
        peaks[(DAY if h < 24 else NEXT, h % 24)] = max(
            sum(1 for a, b in spans if a <= t < b) for t in instants
        )
    return peaks
