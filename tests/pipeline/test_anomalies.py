"""Abuse and outage signals: what stands out from the baseline, and what must not."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pigeonhole.pipeline.anomalies import AnomalyRules, find_anomalies
from pigeonhole.pipeline.periods import DAY_US, day_number

from .frames import DAY, summary_rows

RULES = AnomalyRules()


def _day(i: int) -> dt.date:
    return DAY + dt.timedelta(days=i)


def _daily(spark: Any, days: int, special: dict[int, dict[str, Any]]) -> Any:
    """`days` ordinary all-apps days (1000 finished, 2% scary, 1% crowded) with overrides."""
    rows = []
    for i in range(days):
        row: dict[str, Any] = {
            "day": _day(i),
            "finished": 1000 + (i % 3) * 10,
            "scary": 20 + i % 2,
            "crowded": 10,
        }
        row.update(special.get(i, {}))
        row["scary_rate"] = row["scary"] / row["finished"] if row["finished"] else None
        row["crowded_rate"] = row["crowded"] / row["finished"] if row["finished"] else None
        rows.append(row)
    return summary_rows(spark, "daily_summary", rows)


def _signals(spark: Any, daily: Any, watermark_us: int | None = None) -> set[tuple[Any, str]]:
    hourly = summary_rows(spark, "hourly_summary", [])
    found = find_anomalies(daily, hourly, RULES, watermark_us).collect()
    return {(r["day"], r["signal"]) for r in found}


def test_a_scary_spike_is_flagged_and_ordinary_days_are_not(spark: Any) -> None:
    """Day 14 with 30% scary transfers stands out; the 14 ordinary days before do not."""
    daily = _daily(spark, 15, {14: {"scary": 300}})
    assert _signals(spark, daily) == {(_day(14), "scary_rate_high")}


def test_crowded_burst_and_volume_surge_are_flagged(spark: Any) -> None:
    """A day with triple volume, mostly crowded, raises both signals."""
    daily = _daily(spark, 12, {11: {"finished": 3000, "crowded": 400}})
    assert _signals(spark, daily) == {(_day(11), "volume_high"), (_day(11), "crowded_rate_high")}


def test_a_short_baseline_flags_nothing(spark: Any) -> None:
    """With fewer than 7 earlier days, even a wild day is not judged."""
    daily = _daily(spark, 6, {5: {"scary": 600}})
    assert _signals(spark, daily) == set()


def test_few_events_are_no_alarm(spark: Any) -> None:
    """A rate spike made of a handful of transfers (below min_events_day) is not flagged."""
    daily = _daily(spark, 12, {11: {"finished": 20, "scary": 10}})
    assert (_day(11), "scary_rate_high") not in _signals(spark, daily)


def test_low_volume_is_judged_only_before_the_watermark(spark: Any) -> None:
    """A day still being written is not "low"; once complete, an outage day is."""
    daily = _daily(spark, 12, {11: {"finished": 100, "scary": 2, "crowded": 1}})
    end_of_day_10 = (day_number(_day(11))) * DAY_US
    assert _signals(spark, daily, watermark_us=end_of_day_10) == set()
    assert _signals(spark, daily) == {(_day(11), "volume_low")}


def test_flags_carry_their_baseline(spark: Any) -> None:
    """A flag says what it was compared with: median, fence and number of periods."""
    daily = _daily(spark, 15, {14: {"scary": 300}})
    row = find_anomalies(daily, summary_rows(spark, "hourly_summary", []), RULES, None).first()
    assert row is not None
    assert row["baseline_median"] == pytest.approx(0.0205, abs=0.001)
    assert row["value"] > row["fence"] > row["baseline_q3"]
    assert row["baseline_periods"] == 14
