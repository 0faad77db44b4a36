"""Tiny hand-written input frames for the transform tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pigeonhole.pipeline.periods import to_sessions
from pigeonhole.pipeline.schema import TABLES

DAY = dt.date(2026, 11, 18)
MIDNIGHT = dt.datetime(2026, 11, 18, tzinfo=dt.UTC)
A, B = "app/a", "app/b"

_ROWS = T.StructType(
    [
        T.StructField("app_id", T.StringType()),
        T.StructField("result", T.StringType()),
        T.StructField("started", T.TimestampType()),
        T.StructField("waiting_time", T.DoubleType()),
        T.StructField("total_time", T.DoubleType()),
    ]
)


def at(hours: float) -> dt.datetime:
    """MIDNIGHT (2026-11-18 00:00 UTC) plus `hours`."""
    return MIDNIGHT + dt.timedelta(hours=hours)


def sessions(
    spark: SparkSession, rows: Sequence[tuple[str, str, float, float | None, float]]
) -> DataFrame:
    """(app_id, result, start hour, waiting s, total s) rows -> sessions via `to_sessions`."""
    data = [(app, result, at(start), waiting, total) for app, result, start, waiting, total in rows]
    return to_sessions(spark.createDataFrame(data, _ROWS))


def summary_rows(spark: SparkSession, name: str, rows: list[dict[str, Any]]) -> DataFrame:
    """`name` table rows with zero/NULL defaults for the columns a test does not care about."""
    schema = TABLES[name]
    filled = []
    for row in rows:
        full: dict[str, Any] = {}
        for field in schema.fields:
            default: Any = 0 if isinstance(field.dataType, T.LongType) else None
            full[field.name] = row.get(field.name, default)
        filled.append(tuple(full[f.name] for f in schema.fields))
    return spark.createDataFrame(filled, schema)
