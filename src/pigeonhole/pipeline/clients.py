"""Client implementations and versions in use, and the server's sampled connection counts."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import Grain, keys, period_columns

#: the columns of a client bucket (with the period columns in front)
_BUCKET = ("app_id", "implementation", "version")


@dataclass(frozen=True)
class SideCounts:
    """Binds per (day, hour, bucket, side), with `bucket` a number standing for one
    (app_id, implementation, version); `buckets` maps the numbers back."""

    rows: DataFrame
    buckets: DataFrame

    def cache(self) -> SideCounts:
        return SideCounts(self.rows.cache(), self.buckets.cache())

    def unpersist(self) -> None:
        self.rows.unpersist()
        self.buckets.unpersist()


def binds_per_side(binds: DataFrame) -> SideCounts:
    """`client_versions` rows -> binds per (day, hour, bucket, side).

    The one pass over the raw binds that both client tables derive from (cache it when
    both are computed). The few distinct (app, implementation, version) triples are
    numbered first, so the shuffle of one row per side carries an int instead of three
    strings (at 10 M mailboxes that halves the step's time). The rows are hash-partitioned
    by everything but `hour`, so the daily table can merge a side's hours without another
    shuffle.
    """
    buckets = (
        binds.select(*_BUCKET)
        .distinct()
        .select(*_BUCKET, F.row_number().over(Window.orderBy(*_BUCKET)).alias("bucket"))
    )
    same = [binds[c].eqNullSafe(buckets[c]) for c in _BUCKET]  # NULL version is a bucket
    coded = (
        binds.join(F.broadcast(buckets), same)
        .select(F.unix_micros(binds["connect_time"]).alias("us"), "bucket", binds["side"])
        .select(*period_columns("us", "hour"), "bucket", "side")
    )
    rows = (
        coded.repartition("day", "bucket", "side")
        .groupBy("day", "hour", "bucket", "side")
        .agg(F.count("*").alias("binds"))
    )
    return SideCounts(rows, buckets)


def clients_from_sides(per_side: SideCounts, grain: Grain) -> DataFrame:
    """`binds_per_side` -> binds and distinct sides per (period, app, impl, version).

    A client that sent no version keeps NULL implementation and version: it is counted
    under NULL, never folded into another bucket. A side binding in several hours of a
    day is one side of that day.
    """
    group = [*keys(grain), "bucket"]
    sides = per_side.rows
    if grain == "day":
        # two plain aggregations count distinct sides exactly without countDistinct's
        # row expansion; the first needs no shuffle (see `binds_per_side`)
        sides = sides.groupBy(*group, "side").agg(F.sum("binds").alias("binds"))
    counts = sides.groupBy(*group).agg(F.sum("binds").alias("binds"), F.count("*").alias("sides"))
    return counts.join(F.broadcast(per_side.buckets), "bucket").select(
        *keys(grain), *_BUCKET, "binds", "sides"
    )


def clients_by_period(binds: DataFrame, grain: Grain) -> DataFrame:
    """`client_versions` rows -> binds and distinct sides per (period, app, impl, version)."""
    return clients_from_sides(binds_per_side(binds), grain)


def hourly_connections(samples: DataFrame) -> DataFrame:
    """`connection_counts` samples -> per hour, the sample count and each gauge's maximum."""
    gauges = ("connections", "bound", "subscribed", "nameplates", "mailboxes")
    rows = samples.select(F.unix_micros("sampled").alias("us"), *gauges)
    return (
        rows.select(*period_columns("us", "hour"), *gauges)
        .groupBy("day", "hour")
        .agg(F.count("*").alias("samples"), *(F.max(g).alias(f"max_{g}") for g in gauges))
        .select("day", "hour", "samples", *(f"max_{g}" for g in gauges))
    )
