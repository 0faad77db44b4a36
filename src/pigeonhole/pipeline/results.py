"""Counts of sessions by result per period: started in the period, and finished in it."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import Grain, keys, period_columns


def results_by_period(sessions: DataFrame, grain: Grain) -> DataFrame:
    """Sessions -> one row per (period, app_id, result) with `count` and `started_count`.

    `count` counts sessions that finished (were deleted) in the period, `started_count`
    those that started in it; a session that crosses midnight counts in two days.
    """
    one, zero = F.lit(1).cast("long"), F.lit(0).cast("long")
    started = sessions.select(
        *period_columns("start_us", grain),
        "app_id",
        "result",
        zero.alias("count"),
        one.alias("started_count"),
    )
    finished = sessions.select(
        *period_columns("end_us", grain),
        "app_id",
        "result",
        one.alias("count"),
        zero.alias("started_count"),
    )
    return (
        started.unionByName(finished)
        .groupBy(*keys(grain), "app_id", "result")
        .agg(F.sum("count").alias("count"), F.sum("started_count").alias("started_count"))
        .select(*keys(grain), "app_id", "result", "count", "started_count")
    )


def daily_from_hourly(hourly: DataFrame) -> DataFrame:
    """`results_by_period(sessions, "hour")` -> the same counts per day (sums of the hours).

    Exact, since every session is counted in the hour (and so the day) it started and the
    one it finished; reading the small hourly table spares a second pass over the sessions.
    """
    return (
        hourly.groupBy("day", "app_id", "result")
        .agg(
            F.sum("count").cast("long").alias("count"),
            F.sum("started_count").cast("long").alias("started_count"),
        )
        .select("day", "app_id", "result", "count", "started_count")
    )
