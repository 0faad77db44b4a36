"""Waiting-time and total-time distributions (p50, p90, p99) of sessions finished per period."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import Grain, keys, period_columns, with_all_apps

PERCENTILES = (50, 90, 99)
#: percentile_approx's accuracy: exact below this many values per group, else 1/ACCURACY
ACCURACY = 10_000


def timing_by_period(sessions: DataFrame, grain: Grain) -> DataFrame:
    """Sessions -> per (period, app_id or NULL for all apps): `waited` and the percentiles.

    A NULL waiting time (only one side came) is left out of the waiting-time percentiles
    and of `waited`, but the session still counts in the total-time percentiles.
    """
    fractions = [p / 100 for p in PERCENTILES]
    scoped = with_all_apps(
        sessions.select(*period_columns("end_us", grain), "app_id", "waiting_time", "total_time")
    )
    stats = scoped.groupBy(*keys(grain), "app_id").agg(
        F.count("waiting_time").alias("waited"),
        F.percentile_approx("waiting_time", fractions, ACCURACY).alias("waiting"),
        F.percentile_approx("total_time", fractions, ACCURACY).alias("total"),
    )
    return stats.select(
        *keys(grain),
        "app_id",
        "waited",
        *(F.col("waiting")[i].alias(f"waiting_p{p}") for i, p in enumerate(PERCENTILES)),
        *(F.col("total")[i].alias(f"total_p{p}") for i, p in enumerate(PERCENTILES)),
    )
