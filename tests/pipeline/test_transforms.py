"""Pure transforms on tiny hand-written frames: results, timing, clients and connections."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pigeonhole.pipeline.clients import (
    binds_per_side,
    clients_by_period,
    clients_from_sides,
    hourly_connections,
)
from pigeonhole.pipeline.results import results_by_period
from pigeonhole.pipeline.timing import timing_by_period

from .frames import DAY, A, B, at, sessions

pytestmark = pytest.mark.usefixtures("spark")
NEXT = DAY.replace(day=19)


def test_a_session_across_midnight_starts_on_one_day_and_finishes_on_the_next(spark: Any) -> None:
    """`started_count` goes to the start day and `count` (finished) to the end day."""
    frame = sessions(spark, [(A, "happy", 23.5, 1.0, 3600.0), (A, "happy", 1.0, 1.0, 60.0)])
    assertDataFrameEqual(
        results_by_period(frame, "day"),
        [
            Row(day=DAY, app_id=A, result="happy", count=1, started_count=2),
            Row(day=NEXT, app_id=A, result="happy", count=1, started_count=0),
        ],
    )


def test_hourly_results_split_at_the_hour(spark: Any) -> None:
    """A session from 10:50 to 11:10 starts in hour 10 and finishes in hour 11."""
    frame = sessions(spark, [(A, "lonely", 10 + 50 / 60, None, 1200.0)])
    assertDataFrameEqual(
        results_by_period(frame, "hour"),
        [
            Row(day=DAY, hour=10, app_id=A, result="lonely", count=0, started_count=1),
            Row(day=DAY, hour=11, app_id=A, result="lonely", count=1, started_count=0),
        ],
    )


def test_null_waiting_time_is_left_out_of_waiting_percentiles_only(spark: Any) -> None:
    """A lonely session (NULL waiting) counts in total time but not in waiting time."""
    frame = sessions(spark, [(A, "happy", 1.0, 4.0, 10.0), (A, "lonely", 1.0, None, 500.0)])
    row = timing_by_period(frame, "day").where("app_id IS NOT NULL").collect()[0]
    assert (row["waited"], row["waiting_p50"], row["waiting_p99"]) == (1, 4.0, 4.0)
    assert (row["total_p50"], row["total_p99"]) == (10.0, 500.0)


def test_only_lonely_sessions_give_null_waiting_percentiles(spark: Any) -> None:
    """With no second side at all, waiting percentiles are NULL, not 0."""
    frame = sessions(spark, [(A, "lonely", 1.0, None, 50.0)])
    row = timing_by_period(frame, "day").where("app_id IS NULL").collect()[0]
    assert (row["waited"], row["waiting_p50"], row["total_p50"]) == (0, None, 50.0)


def test_percentiles_of_a_small_group_are_exact(spark: Any) -> None:
    """Below percentile_approx's accuracy the p50/p90/p99 of 1..100 are 50, 90 and 99."""
    frame = sessions(spark, [(A, "happy", 2.0, float(w), 3000.0) for w in range(1, 101)])
    row = timing_by_period(frame, "day").where("app_id IS NULL").collect()[0]
    assert (row["waiting_p50"], row["waiting_p90"], row["waiting_p99"]) == (50.0, 90.0, 99.0)


def test_percentiles_of_a_large_group_are_exact_too(spark: Any) -> None:
    """20,001 waits of 1..20001 s in one hour and app, shuffled: nearest rank gives exactly
    10001, 18001 and 19801 (ceil(0.99 * 20001)); percentile_approx would be off by up to
    1/10,000 of the rank here."""
    waits = [float(w) for w in range(1, 20_002)]
    random.Random(5).shuffle(waits)
    frame = sessions(spark, [(A, "happy", 2.0, w, 30_000.0) for w in waits])
    for grain in ("day", "hour"):
        row = timing_by_period(frame, grain).where("app_id IS NOT NULL").collect()[0]
        assert (row["waited"], row["waiting_p50"], row["waiting_p90"], row["waiting_p99"]) == (
            20_001,
            10_001.0,
            18_001.0,
            19_801.0,
        )
        assert row["total_p99"] == 30_000.0


def test_clients_keep_null_versions_and_count_distinct_sides(spark: Any) -> None:
    """A client that sent no version stays NULL; a side binding twice is one side."""
    binds = spark.createDataFrame(
        [
            (A, "s1", at(1), "python", "0.24.0"),
            (A, "s1", at(1.5), "python", "0.24.0"),
            (A, "s2", at(1.2), None, None),
        ],
        "app_id string, side string, connect_time timestamp, implementation string, version string",
    )
    assertDataFrameEqual(
        clients_by_period(binds, "day"),
        [
            Row(day=DAY, app_id=A, implementation="python", version="0.24.0", binds=2, sides=1),
            Row(day=DAY, app_id=A, implementation=None, version=None, binds=1, sides=1),
        ],
    )


def test_one_per_side_pass_gives_both_client_tables(spark: Any) -> None:
    """From one cached per-side frame: a side binding in two hours is one side of the day
    and one side of each hour; sides of other buckets and apps are counted apart."""
    binds = spark.createDataFrame(
        [
            (A, "s1", at(1.2), "python", "0.24.0"),
            (A, "s1", at(2.5), "python", "0.24.0"),
            (A, "s1", at(2.7), "python", "0.24.0"),
            (A, "s2", at(2.1), "python", "0.24.0"),
            (A, "s2", at(2.2), "python", "0.25.0"),
            (B, "s1", at(1.4), "python", "0.24.0"),
            (A, "s3", at(25.0), "python", "0.24.0"),
        ],
        "app_id string, side string, connect_time timestamp, implementation string, version string",
    )
    sides = binds_per_side(binds).cache()
    py, old, new = "python", "0.24.0", "0.25.0"
    assertDataFrameEqual(
        clients_from_sides(sides, "day"),
        [
            Row(day=DAY, app_id=A, implementation=py, version=old, binds=4, sides=2),
            Row(day=DAY, app_id=A, implementation=py, version=new, binds=1, sides=1),
            Row(day=DAY, app_id=B, implementation=py, version=old, binds=1, sides=1),
            Row(day=NEXT, app_id=A, implementation=py, version=old, binds=1, sides=1),
        ],
    )
    assertDataFrameEqual(
        clients_from_sides(sides, "hour"),
        [
            Row(day=DAY, hour=1, app_id=A, implementation=py, version=old, binds=1, sides=1),
            Row(day=DAY, hour=2, app_id=A, implementation=py, version=old, binds=3, sides=2),
            Row(day=DAY, hour=2, app_id=A, implementation=py, version=new, binds=1, sides=1),
            Row(day=DAY, hour=1, app_id=B, implementation=py, version=old, binds=1, sides=1),
            Row(day=NEXT, hour=1, app_id=A, implementation=py, version=old, binds=1, sides=1),
        ],
    )
    sides.unpersist()


def test_connection_samples_give_hourly_maxima(spark: Any) -> None:
    """Samples within an hour reduce to their count and each gauge's maximum."""
    samples = spark.createDataFrame(
        [(at(3.1), 5, 4, 3, 2, 2), (at(3.9), 9, 8, 6, 1, 4), (at(4.0), 1, 1, 0, 0, 0)],
        "sampled timestamp, connections long, bound long, subscribed long, nameplates long, "
        "mailboxes long",
    )
    assertDataFrameEqual(
        hourly_connections(samples),
        [
            Row(
                day=DAY,
                hour=3,
                samples=2,
                max_connections=9,
                max_bound=8,
                max_subscribed=6,
                max_nameplates=2,
                max_mailboxes=4,
            ),
            Row(
                day=DAY,
                hour=4,
                samples=1,
                max_connections=1,
                max_bound=1,
                max_subscribed=0,
                max_nameplates=0,
                max_mailboxes=0,
            ),
        ],
    )
