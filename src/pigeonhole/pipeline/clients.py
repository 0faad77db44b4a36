"""Client implementations and versions in use, and the server's sampled connection counts."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import Grain, keys, period_columns


def clients_by_period(binds: DataFrame, grain: Grain) -> DataFrame:
    """`client_versions` rows -> binds and distinct sides per (period, app, impl, version).

    A client that sent no version keeps NULL implementation and version: it is counted
    under NULL, never folded into another bucket.
    """
    rows = binds.select(
        F.unix_micros("connect_time").alias("us"), "app_id", "side", "implementation", "version"
    )
    group = [*keys(grain), "app_id", "implementation", "version"]
    # two plain aggregations count distinct sides exactly without countDistinct's row expansion
    per_side = (
        rows.select(*period_columns("us", grain), "app_id", "side", "implementation", "version")
        .groupBy(*group, "side")
        .agg(F.count("*").alias("binds"))
    )
    return (
        per_side.groupBy(*group)
        .agg(F.sum("binds").alias("binds"), F.count("*").alias("sides"))
        .select(*group, "binds", "sides")
    )


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
