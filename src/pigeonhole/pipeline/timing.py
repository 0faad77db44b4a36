"""Waiting-time and total-time distributions (p50, p90, p99) of sessions finished per period.

Percentiles are exact, by nearest rank: the p-th percentile of n values is the
ceil(p/100 * n)-th smallest (what `percentile_approx` returns while it is exact, and
DuckDB's `quantile_disc`). Spark sends each day the sessions that finished in it, and one
numpy pass per day (`applyInPandas`) sorts each period's values and picks the ranks: at
10 M mailboxes this takes a third of the time of two `percentile_approx` passes, which
are approximate above 10,000 values a group.
"""

from __future__ import annotations

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import ALL_APPS, DAY_US, HOUR_US, Grain, app_scopes, keys

PERCENTILES = (50, 90, 99)
_STATS = [
    "waited",
    *(f"waiting_p{p}" for p in PERCENTILES),
    *(f"total_p{p}" for p in PERCENTILES),
]
_SCHEMA = "d int, h int, scope int, waited long, " + ", ".join(f"{c} double" for c in _STATS[1:])


def timing_by_period(sessions: DataFrame, grain: Grain) -> DataFrame:
    """Sessions -> per (period, app_id or NULL for all apps): `waited` and the percentiles.

    Periods are those the sessions finished in. A NULL waiting time (only one side came)
    is left out of the waiting-time percentiles and of `waited`, but the session still
    counts in the total-time percentiles.
    """
    apps = app_scopes(sessions)
    rows = sessions.join(F.broadcast(apps), "app_id").select(
        F.expr(f"CAST(end_us div {DAY_US} AS INT)").alias("d"),
        "scope",
        "end_us",
        "waiting_time",
        "total_time",
    )
    stats = rows.groupBy("d").applyInPandas(_by_hour if grain == "hour" else _by_day, _SCHEMA)
    named = stats.join(F.broadcast(apps), "scope", "left")  # scope 0 has no app: NULL
    period = [F.date_from_unix_date("d").alias("day")]
    if grain == "hour":
        period.append(F.col("h").alias("hour"))
    return named.select(*period, "app_id", *_STATS).select(*keys(grain), "app_id", *_STATS)


def _by_day(rows: pd.DataFrame) -> pd.DataFrame:
    return _day_timing(rows, hourly=False)


def _by_hour(rows: pd.DataFrame) -> pd.DataFrame:
    return _day_timing(rows, hourly=True)


def _day_timing(rows: pd.DataFrame, hourly: bool) -> pd.DataFrame:
    """One day's finished sessions -> (d, h, scope, waited, percentiles) per hour (or for
    the day, h = 0) and scope, the all-apps scope included."""
    day = int(rows["d"].iat[0])
    scope = rows["scope"].to_numpy(np.int64)
    hour = (
        (rows["end_us"].to_numpy(np.int64) - day * DAY_US) // HOUR_US
        if hourly
        else np.zeros(len(scope), np.int64)
    )
    group = np.concatenate([scope * 24 + hour, ALL_APPS * 24 + hour])
    ids, member = np.unique(group, return_inverse=True)
    waiting = np.tile(rows["waiting_time"].to_numpy(np.float64, na_value=np.nan), 2)
    total = np.tile(rows["total_time"].to_numpy(np.float64, na_value=np.nan), 2)
    waited = np.bincount(member, weights=~np.isnan(waiting), minlength=len(ids))
    out = {
        "d": np.full(len(ids), day, np.int32),
        "h": (ids % 24).astype(np.int32),
        "scope": (ids // 24).astype(np.int32),
        "waited": waited.astype(np.int64),
    }
    for name, values in (("waiting", waiting), ("total", total)):
        for p, column in zip(PERCENTILES, nearest_rank(values, member, len(ids)), strict=True):
            out[f"{name}_p{p}"] = column
    return pd.DataFrame(out)


def nearest_rank(values: np.ndarray, member: np.ndarray, groups: int) -> list[np.ndarray]:
    """For each percentile, each group's ceil(p/100 * n)-th smallest non-NaN value (NaN
    for a group with none); `member` is each value's group number in [0, groups)."""
    order = np.lexsort((values, member))  # by group, then value; NaN last in its group
    ranked = values[order]
    sizes = np.bincount(member, minlength=groups)
    counted = np.bincount(member, weights=~np.isnan(values), minlength=groups).astype(np.int64)
    offset = np.cumsum(sizes) - sizes
    found = []
    for p in PERCENTILES:
        rank = np.ceil(p / 100 * counted).astype(np.int64)  # as percentile_approx: in double
        pick = offset + np.maximum(rank, 1) - 1
        found.append(np.where(counted > 0, ranked[np.minimum(pick, len(ranked) - 1)], np.nan))
    return found
