"""Peak concurrency: the most sessions open at once in each hour, exact across boundaries.

A session is open on the half-open interval [start, end). Each session is cut into one
segment per UTC hour it overlaps, so every hour can be computed on its own: within an
hour, the level after the events at time t is the number of +1 (segment start) minus -1
(segment end) events at or before t, and the hour's peak is the highest such level. A
session carried in from an earlier hour or day starts a segment at the hour's first
instant, which is what the textbook running sum misses; sessions
that end exactly at the hour's end need no -1. All events at one instant are applied
together, so back-to-back sessions never count as overlapping.

How: Spark sends each day the sessions open during it (a session crossing midnight goes
to both days), and one vectorised numpy pass per day (`applyInPandas`) cuts them into
hour segments and runs the sums. A day of sessions is small (a million mailboxes over
90 days is 11,000 a day), and this takes half the time of a Spark window over four
events per session, which shuffles and sorts every event (10 M mailboxes, both peak
tables: 38 s against 78 s; docs/pipeline.md, "Benchmark").
The all-apps scope has a row for every hour of the range, zero when idle.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import ALL_APPS, DAY_US, HOUR_US, app_scopes, day_number

_PEAKS = "d int, h int, scope int, peak long"


def hourly_peaks(sessions: DataFrame, first_day: dt.date, last_day: dt.date) -> DataFrame:
    """Sessions -> (day, hour, app_id, peak) for the hours of [first_day, last_day].

    The all-apps scope (`app_id` NULL) has a row for every hour, zero when idle; an app has
    rows only for hours in which it had a session open.
    """
    lo, hi = day_number(first_day), day_number(last_day) + 1  # in days, half-open
    apps = app_scopes(sessions)
    first = F.greatest(F.expr(f"start_us div {DAY_US}"), F.lit(lo))
    last = F.least(F.expr(f"(end_us - 1) div {DAY_US}"), F.lit(hi - 1))
    open_in_range = (
        (F.col("end_us") > F.col("start_us"))
        & (F.col("end_us") > F.lit(lo * DAY_US))
        & (F.col("start_us") < F.lit(hi * DAY_US))
    )
    by_day = (
        sessions.where(open_in_range)
        .join(F.broadcast(apps), "app_id")
        .select(
            F.explode(F.sequence(first.cast("int"), last.cast("int"))).alias("d"),
            "scope",
            "start_us",
            "end_us",
        )
    )
    peaks = by_day.groupBy("d").applyInPandas(_day_peaks, _PEAKS)
    # every hour of the range gets an all-apps row: a zero that an idle hour keeps (one
    # aggregation over the small result, so the numpy pass runs once)
    idle = sessions.sparkSession.range(lo * 24, hi * 24).select(
        F.expr("CAST(id div 24 AS INT)").alias("d"),
        F.expr("CAST(id % 24 AS INT)").alias("h"),
        F.lit(ALL_APPS).alias("scope"),
        F.lit(0).cast("long").alias("peak"),
    )
    rows = peaks.unionByName(idle).groupBy("d", "h", "scope").agg(F.max("peak").alias("peak"))
    named = rows.join(F.broadcast(apps), "scope", "left")  # scope 0 has no app: NULL
    return named.select(
        F.date_from_unix_date("d").alias("day"), F.col("h").alias("hour"), "app_id", "peak"
    )


def daily_peaks(hourly: DataFrame) -> DataFrame:
    """Hourly peaks -> (day, app_id, peak): a day's peak is its highest hour's."""
    return (
        hourly.groupBy("day", "app_id")
        .agg(F.max("peak").alias("peak"))
        .select("day", "app_id", "peak")
    )


def _day_peaks(rows: pd.DataFrame) -> pd.DataFrame:
    """One day's open sessions (d, scope, start_us, end_us) -> (d, h, scope, peak)."""
    day = int(rows["d"].iat[0])
    origin = day * DAY_US
    start = np.maximum(rows["start_us"].to_numpy(np.int64), origin) - origin
    end = np.minimum(rows["end_us"].to_numpy(np.int64), origin + DAY_US) - origin
    scope = rows["scope"].to_numpy(np.int64)
    peaks = hour_peaks(start, end, scope)
    return pd.DataFrame(
        {
            "d": np.full(len(peaks[0]), day, dtype=np.int32),
            "h": peaks[0].astype(np.int32),
            "scope": peaks[1].astype(np.int32),
            "peak": peaks[2],
        }
    )


def hour_peaks(
    start: np.ndarray, end: np.ndarray, scope: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sessions [start, end) within one day (microseconds from its midnight, end > start)
    -> (hour, scope, peak) for each hour and scope with a session open, plus scope 0 (all
    sessions together) for those hours."""
    first = start // HOUR_US
    last = (end - 1) // HOUR_US
    pieces = last - first + 1  # hour segments per session
    which = np.repeat(np.arange(len(start)), pieces)
    nth = np.arange(len(which)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    hour = first[which] + nth
    # +1 where each segment starts: the session's start, or its hour's first instant
    up_t = np.where(nth == 0, start[which], hour * HOUR_US)
    # -1 where the last segment ends, unless that is exactly the end of its hour
    ends = (nth == pieces[which] - 1) & (end[which] < (hour + 1) * HOUR_US)
    own, down_h, down_t = scope[which], hour[ends], end[which][ends]
    every = np.full(1, ALL_APPS, np.int64)  # broadcast over the events
    keys = np.sort(
        np.concatenate(
            [
                _event_keys(own, hour, up_t, 1),
                _event_keys(every, hour, up_t, 1),
                _event_keys(own[ends], down_h, down_t, 0),
                _event_keys(every, down_h, down_t, 0),
            ]
        )
    )
    # sorted by (scope, hour) then time, and at one instant the -1s first: every partial
    # sum inside an instant then lies between the levels before and after it, so the
    # highest partial sum is the highest level after an instant
    delta = (keys & 1) * 2 - 1
    group = keys >> 33
    total = np.cumsum(delta)
    new = np.ones(len(keys), bool)
    new[1:] = group[1:] != group[:-1]
    starts = np.flatnonzero(new)
    before = np.concatenate([[0], total[starts[1:] - 1]])  # the sum before each group
    level = total - before[np.cumsum(new) - 1]
    ids = group[starts]
    return ids % 24, ids // 24, np.maximum.reduceat(level, starts)


def _event_keys(scope: np.ndarray, hour: np.ndarray, t: np.ndarray, up: int) -> np.ndarray:
    """One int64 per event that sorts by (scope, hour, time, -1 before +1): bit 0 is the
    direction, bits 1-32 the microsecond within the hour (< 2**32), the rest scope*24+hour.
    """
    keys: np.ndarray = ((((scope * 24 + hour) << 32) | (t - hour * HOUR_US)) << 1) | up
    return keys
