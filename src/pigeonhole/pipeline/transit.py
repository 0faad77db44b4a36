"""The transit relay's day: records by mood, bytes relayed, pairs' times and peak pairs.

A relay record is a session like a mailbox: open on `[started, started + total_time)`, and
counted in the period it *ended* in (its bytes and mood are known only then), so a day's
figures are complete once the day is, and an incremental run reads the same files as for
mailboxes. Pairs are the records of mood happy or jilted (the reference writes one happy
record per pair); only they have a waiting time, and only they count in the percentiles
and the peak. The percentiles and the peak reuse the mailbox transforms (timing.py,
concurrency.py) with every record in one scope, so they are exact in the same way.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.concurrency import daily_peaks, hourly_peaks
from pigeonhole.pipeline.periods import DAY_US
from pigeonhole.pipeline.schema import TABLES, TRANSIT_MOODS
from pigeonhole.pipeline.timing import timing_by_period

#: the moods of a pair (the rest are connections that never paired)
PAIRED = ("happy", "jilted")
#: the one scope the relay's records are in (timing.py and concurrency.py want an app)
_RELAY = "transit"


def transit_sessions(rows: DataFrame) -> DataFrame:
    """Input `transit` rows -> sessions (as `periods.to_sessions`) with `total_bytes`."""
    start = F.unix_micros("started")
    return rows.select(
        F.lit(_RELAY).alias("app_id"),
        "result",
        start.alias("start_us"),
        (start + F.floor(F.col("total_time") * 1_000_000)).alias("end_us"),
        "waiting_time",
        "total_time",
        "total_bytes",
    )


def daily_transit(rows: DataFrame, first_day: dt.date, last_day: dt.date) -> DataFrame:
    """Input `transit` rows -> `daily_transit`: one row per day of [first_day, last_day],
    zeros (and NULL percentiles) on a day without records."""
    sessions = transit_sessions(rows)
    pairs = sessions.where(F.col("result").isin(*PAIRED))
    peaks = daily_peaks(hourly_peaks(pairs, first_day, last_day)).where(F.col("app_id").isNull())
    timing = timing_by_period(pairs, "day").where(F.col("app_id").isNull())
    counts = _counts(sessions)
    table = (
        peaks.select("day", F.col("peak").alias("peak_pairs"))
        .join(counts, "day", "left")
        .join(timing.drop("app_id", "waited"), "day", "left")
    )
    names = TABLES["daily_transit"].fieldNames()
    filled = table.fillna(0, subset=[n for n in names if n not in _TIMES and n != "day"])
    return filled.select(*names)


_TIMES = frozenset(f"{kind}_p{p}" for kind in ("waiting", "total") for p in (50, 90, 99))


def _counts(sessions: DataFrame) -> DataFrame:
    """(day, records, pairs, bytes, a count per mood, other) by the day records ended."""
    ended = F.date_from_unix_date(F.expr(f"CAST(end_us div {DAY_US} AS INT)")).alias("day")
    known = F.col("result").isin(*TRANSIT_MOODS)
    measures: list[Column] = [
        F.count(F.lit(1)).cast("long").alias("records"),
        F.count(F.when(F.col("result").isin(*PAIRED), 1)).cast("long").alias("pairs"),
        F.coalesce(F.sum("total_bytes"), F.lit(0)).cast("long").alias("bytes"),
        *(
            F.count(F.when(F.col("result") == mood, 1)).cast("long").alias(mood)
            for mood in TRANSIT_MOODS
        ),
        F.count(F.when(~known | F.col("result").isNull(), 1)).cast("long").alias("other"),
    ]
    return sessions.groupBy(ended).agg(*measures)
