"""Client implementations and versions in use, and the server's sampled connection counts."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import Grain, keys, period_columns

#: the columns of a client bucket (with the period columns in front)
_BUCKET = ("app_id", "implementation", "version")


def binds_per_side(binds: DataFrame) -> DataFrame:
    """`client_versions` rows -> binds per (day, hour, app, impl, version, side).

    The one pass over the raw binds that both client tables derive from (cache it when
    both are computed): its rows are hash-partitioned by everything but `hour`, so the
    daily table can merge a side's hours without another shuffle.
    """
    rows = binds.select(F.unix_micros("connect_time").alias("us"), *_BUCKET, "side").select(
        *period_columns("us", "hour"), *_BUCKET, "side"
    )
    return (
        rows.repartition("day", *_BUCKET, "side")
        .groupBy("day", "hour", *_BUCKET, "side")
        .agg(F.count("*").alias("binds"))
    )


def clients_from_sides(per_side: DataFrame, grain: Grain) -> DataFrame:
    """`binds_per_side` -> binds and distinct sides per (period, app, impl, version).

    A client that sent no version keeps NULL implementation and version: it is counted
    under NULL, never folded into another bucket. A side binding in several hours of a
    day is one side of that day.
    """
    group = [*keys(grain), *_BUCKET]
    sides = per_side
    if grain == "day":
        # two plain aggregations count distinct sides exactly without countDistinct's
        # row expansion; the first needs no shuffle (see `binds_per_side`)
        sides = per_side.groupBy(*group, "side").agg(F.sum("binds").alias("binds"))
    return (
        sides.groupBy(*group)
        .agg(F.sum("binds").alias("binds"), F.count("*").alias("sides"))
        .select(*group, "binds", "sides")
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
