"""One wide row per (period, app or all apps): counts by result, rates, timing and peaks."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import Grain, keys
from pigeonhole.pipeline.schema import TABLES

MOODS = ("happy", "lonely", "scary", "errory", "pruney", "crowded", "quiet")
_COUNTS = ("started", "finished", *MOODS)
_TABLE = {"day": "daily_summary", "hour": "hourly_summary"}


def summarize(
    results: DataFrame,
    timing: DataFrame,
    mailbox_peaks: DataFrame,
    nameplate_peaks: DataFrame,
    grain: Grain,
) -> DataFrame:
    """Merge the per-period parts into the `daily_summary` / `hourly_summary` shape.

    Args:
        results: `results_by_period` of mailboxes (per app; summed here for all apps).
        timing: `timing_by_period` of mailboxes (has its own all-apps rows).
        mailbox_peaks: peaks of mailboxes at `grain`, column `peak`.
        nameplate_peaks: peaks of nameplates at `grain`, column `peak`.
        grain: "day" or "hour".

    Unknown results are counted in `other` (and in `finished`), never as a known mood.
    """
    period = keys(grain)
    per_app = results.groupBy(*period, "app_id").agg(
        F.sum("started_count").alias("started"),
        F.sum("count").alias("finished"),
        *(F.sum(F.when(F.col("result") == m, F.col("count"))).alias(m) for m in MOODS),
    )
    all_apps = (
        per_app.groupBy(*period)
        .agg(*(F.sum(c).alias(c) for c in _COUNTS))
        .withColumn("app_id", F.lit(None).cast("string"))
    )
    parts = [
        per_app,
        all_apps,
        timing,
        mailbox_peaks.withColumnRenamed("peak", "peak_mailboxes"),
        nameplate_peaks.withColumnRenamed("peak", "peak_nameplates"),
    ]
    merged = _merge(parts, [*period, "app_id"])
    return merged.select(*(_final(name) for name in TABLES[_TABLE[grain]].names))


def _merge(parts: list[DataFrame], key: list[str]) -> DataFrame:
    """Outer-merge frames that each have at most one row per key, NULL-safe on `app_id`.

    Every part is widened to all columns with NULLs and the union is grouped by the key
    (grouping treats NULL app_id as one value, unlike a join); `max` picks the one value.
    """
    columns = list(dict.fromkeys(c for part in parts for c in part.columns if c not in key))
    types = {c: t for part in parts for c, t in part.dtypes}
    wide = [
        part.select(
            *key,
            *(
                F.col(c) if c in part.columns else F.lit(None).cast(types[c]).alias(c)
                for c in columns
            ),
        )
        for part in parts
    ]
    union = reduce(DataFrame.unionByName, wide)
    return union.groupBy(*key).agg(*(F.max(c).alias(c) for c in columns))


def _final(name: str) -> Column:
    if name in (*_COUNTS, "waited", "peak_mailboxes", "peak_nameplates"):
        return F.coalesce(F.col(name), F.lit(0)).cast("long").alias(name)
    if name == "other":
        known = reduce(lambda a, b: a + b, (F.coalesce(F.col(m), F.lit(0)) for m in MOODS))
        return (F.coalesce(F.col("finished"), F.lit(0)) - known).cast("long").alias(name)
    if name.endswith("_rate"):
        mood = {"success_rate": "happy", "scary_rate": "scary", "crowded_rate": "crowded"}[name]
        finished = F.col("finished")
        return F.when(finished > 0, F.coalesce(F.col(mood), F.lit(0)) / finished).alias(name)
    return F.col(name)
