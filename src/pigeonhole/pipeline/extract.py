"""Reading the report's inputs: the usage dataset (with its explicit schema) and past output.

Only this module knows where data lives. Input tables are read with `schema.INPUT`, never
inferred; `_schema.json` is checked first so that a dataset of another format or version is
refused with a clear message rather than misread.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pigeonhole.pipeline import storage
from pigeonhole.pipeline.dataset import FORMAT_NAME, SCHEMA_VERSION
from pigeonhole.pipeline.schema import CURRENT, INPUT, TABLES


class DatasetError(Exception):
    """The input is not a usage dataset this version of the report can read."""


def check_dataset(spark: SparkSession, root: str) -> None:
    """Raise DatasetError unless ROOT/_schema.json names this format and version."""
    text = storage.read_text(spark, storage.join(root, "_schema.json"))
    if text is None:
        raise DatasetError(f"{root} has no _schema.json: not a pigeonhole usage dataset")
    meta = json.loads(text)
    if meta.get("format") != FORMAT_NAME or meta.get("version") != SCHEMA_VERSION:
        raise DatasetError(
            f"{root} is {meta.get('format')} version {meta.get('version')}; "
            f"this report reads {FORMAT_NAME} version {SCHEMA_VERSION}"
        )


def read_table(spark: SparkSession, root: str, table: str, uris: Sequence[str]) -> DataFrame:
    """The rows of the given files of input `table` (an empty frame for no files)."""
    schema = INPUT[table]
    if not uris:
        return spark.createDataFrame([], schema)
    reader = spark.read.schema(schema).option("basePath", storage.join(root, table))
    return reader.parquet(*uris).select(*schema.names)


@dataclass(frozen=True)
class Current:
    """The dataset's `current` record: blurring, and when the data ends (the last sample)."""

    blur_time: int | None
    updated_us: int | None


def read_current(spark: SparkSession, root: str) -> Current:
    """The `current` record (all None when the dataset has none)."""
    uri = storage.join(root, "current")
    if not storage.exists(spark, storage.join(uri, "current.parquet")):
        return Current(None, None)
    rows = (
        spark.read.schema(CURRENT)
        .parquet(uri)
        .select("blur_time", F.unix_micros("updated"))
        .collect()
    )
    if not rows:
        return Current(None, None)
    blur, updated = rows[0]
    return Current(None if blur is None else int(blur), int(updated))


def read_output(spark: SparkSession, output_root: str, name: str) -> DataFrame:
    """A table the report wrote before (empty if it has not been written yet)."""
    schema = TABLES[name]
    uri = storage.join(output_root, "tables", name)
    if not storage.exists(spark, uri):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(uri).select(*schema.names)


def read_catalog(spark: SparkSession, output_root: str) -> list[tuple[str, str, dt.date, dt.date]]:
    """The input files a previous run has processed: (table, path, day, end_day) rows."""
    uri = storage.join(output_root, "_state", "input_files")
    if not storage.exists(spark, storage.join(uri, "_SUCCESS")):
        return []
    return [
        (r["table"], r["path"], r["day"], r["end_day"]) for r in spark.read.parquet(uri).collect()
    ]
