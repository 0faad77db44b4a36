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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import HOUR_US, day_number

#: the scope number of all apps together (apps are numbered from 1)
_ALL_APPS = 0


def hourly_peaks(sessions: DataFrame, first_day: dt.date, last_day: dt.date) -> DataFrame:
    """Sessions -> (day, hour, app_id, peak) for the hours of [first_day, last_day].

    The all-apps scope (`app_id` NULL) has a row for every hour, zero when idle; an app has
    rows only for hours in which it had a session open.
    """
    lo, hi = day_number(first_day) * 24, (day_number(last_day) + 1) * 24  # in hours
    # Scopes are small integers in the shuffle and the sort (0: all apps, 1..n: the apps),
    # not app_id strings: most app ids share their first 8 bytes, so a sort on app_id
    # could hardly use its prefix and compared whole strings almost every time.
    apps = (
        sessions.select("app_id")
        .distinct()
        .select("app_id", F.row_number().over(Window.orderBy("app_id")).alias("scope"))
    )
    coded = sessions.join(F.broadcast(apps), "app_id").drop("app_id")
    events = _segment_events(coded, lo, hi)
    ticks = sessions.sparkSession.range(lo, hi).select(
        F.lit(_ALL_APPS).alias("scope"),
        F.col("id").alias("h"),
        (F.col("id") * HOUR_US).alias("t"),
        F.lit(0).cast("long").alias("delta"),
    )
    hour = (
        Window.partitionBy("h", "scope")
        .orderBy("t")
        .rangeBetween(Window.unboundedPreceding, Window.currentRow)
    )
    levels = events.unionByName(ticks).select(
        "scope", "h", F.sum("delta").over(hour).alias("level")
    )
    peaks = levels.groupBy("scope", "h").agg(F.max("level").cast("long").alias("peak"))
    named = peaks.join(F.broadcast(apps), "scope", "left")  # scope 0 has no app: NULL
    return named.select(
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
    """Sessions -> (scope, h, t, delta): +1/-1 events of each session's hourly segments,
    for the session's app (`scope`) and for all apps (scope `_ALL_APPS`).

    A session's first segment starts at its start (or the range's first hour), its last
    segment ends at its end unless that lies past the range; every hour between gets a +1
    at its first instant (carried in). The common one-hour session costs one scan and one
    generator row per event; only sessions that cross an hour boundary are exploded.
    """
    first = F.greatest(F.expr(f"start_us div {HOUR_US}"), F.lit(lo))
    last = F.least(F.expr(f"(end_us - 1) div {HOUR_US}"), F.lit(hi - 1))
    open_in_range = (
        (F.col("end_us") > F.col("start_us"))
        & (F.col("end_us") > lo * HOUR_US)
        & (F.col("start_us") < hi * HOUR_US)
    )
    spans = sessions.where(open_in_range).select(
        "scope", "start_us", "end_us", first.alias("first"), last.alias("last")
    )
    every = F.lit(_ALL_APPS)
    one = F.lit(1).cast("long")

    def own(scope: Column) -> list[Column]:
        start = F.struct(
            scope.alias("scope"),
            F.col("first").alias("h"),
            F.greatest("start_us", F.col("first") * HOUR_US).alias("t"),
            one.alias("delta"),
        )
        end = F.struct(
            scope.alias("scope"),
            F.col("last").alias("h"),
            F.col("end_us").alias("t"),
            (-one).alias("delta"),
        )
        return [start, end]

    ends_in_range = (F.col("delta") > 0) | (F.col("t") < (F.col("h") + 1) * HOUR_US)
    starts_and_ends = spans.select(F.inline(F.array(*own(F.col("scope")), *own(every)))).where(
        ends_in_range
    )
    carried = (
        spans.where(F.col("first") < F.col("last"))
        .select(F.explode(F.array("scope", every)).alias("scope"), "first", "last")
        .select("scope", F.explode(F.sequence(F.col("first") + 1, F.col("last"))).alias("h"))
        .select("scope", "h", (F.col("h") * HOUR_US).alias("t"), one.alias("delta"))
    )
    return starts_and_ends.unionByName(carried)
