"""Peak concurrency: the most sessions open at once in each hour, exact across boundaries.

A session is open on the half-open interval [start, end). Each session is cut into one
segment per UTC hour it overlaps, so every hour can be computed on its own: within an
hour, the level after the events at time t is the number of +1 (segment start) minus -1
(segment end) events at or before t, and the hour's peak is the highest such level. A
session carried in from an earlier hour or day starts a segment at the hour's first
instant, which is what the textbook running sum misses (pyspark-notes §3.1); sessions
that end exactly at the hour's end need no -1. All events at one instant are applied
together (a RANGE window frame), so back-to-back sessions never count as overlapping.

The all-apps scope also gets a zero event at every hour start, so idle hours report 0.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import HOUR_US, day_number, with_all_apps


def hourly_peaks(sessions: DataFrame, first_day: dt.date, last_day: dt.date) -> DataFrame:
    """Sessions -> (day, hour, app_id, peak) for the hours of [first_day, last_day].

    The all-apps scope (`app_id` NULL) has a row for every hour, zero when idle; an app has
    rows only for hours in which it had a session open.
    """
    lo, hi = day_number(first_day) * 24, (day_number(last_day) + 1) * 24  # in hours
    events = with_all_apps(_segment_events(sessions, lo, hi))
    ticks = sessions.sparkSession.range(lo, hi).select(
        F.lit(None).cast("string").alias("app_id"),
        F.col("id").alias("h"),
        (F.col("id") * HOUR_US).alias("t"),
        F.lit(0).cast("long").alias("delta"),
    )
    hour = (
        Window.partitionBy("app_id", "h")
        .orderBy("t")
        .rangeBetween(Window.unboundedPreceding, Window.currentRow)
    )
    levels = events.unionByName(ticks).select(
        "app_id", "h", F.sum("delta").over(hour).alias("level")
    )
    peaks = levels.groupBy("app_id", "h").agg(F.max("level").cast("long").alias("peak"))
    return peaks.select(
        F.date_from_unix_date(F.expr("CAST(h div 24 AS INT)")).alias("day"),
        F.expr("CAST(h % 24 AS INT)").alias("hour"),
        "app_id",
        "peak",
    )


def daily_peaks(hourly: DataFrame) -> DataFrame:
    """Hourly peaks -> (day, app_id, peak): a day's peak is its highest hour's."""
    return (
        hourly.groupBy("day", "app_id")
        .agg(F.max("peak").alias("peak"))
        .select("day", "app_id", "peak")
    )


def _segment_events(sessions: DataFrame, lo: int, hi: int) -> DataFrame:
    """Sessions -> (app_id, h, t, delta): +1/-1 events of each session's hourly segments."""
    first = F.greatest(F.expr(f"start_us div {HOUR_US}"), F.lit(lo))
    last = F.least(F.expr(f"(end_us - 1) div {HOUR_US}"), F.lit(hi - 1))
    open_in_range = (
        (F.col("end_us") > F.col("start_us"))
        & (F.col("end_us") > lo * HOUR_US)
        & (F.col("start_us") < hi * HOUR_US)
    )
    segments = sessions.where(open_in_range).select(
        "app_id", "start_us", "end_us", F.explode(F.sequence(first, last)).alias("h")
    )
    hour_start, hour_end = F.col("h") * HOUR_US, (F.col("h") + 1) * HOUR_US
    one = F.lit(1).cast("long")
    starts = segments.select(
        "app_id", "h", F.greatest("start_us", hour_start).alias("t"), one.alias("delta")
    )
    ends = segments.where(F.col("end_us") < hour_end).select(
        "app_id", "h", F.col("end_us").alias("t"), (-one).alias("delta")
    )
    return starts.unionByName(ends)
