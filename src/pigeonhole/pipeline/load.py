"""Writing the report's tables and state; only this module writes.

Daily and hourly tables are partitioned by `day` and written with dynamic partition
overwrite, so an incremental run replaces exactly the days it recomputed and leaves the
others untouched; `full` replaces the whole table. Spark's output committer publishes each
table's files only when its write job succeeds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pigeonhole.pipeline import storage

_CATALOG = T.StructType(
    [
        T.StructField("table", T.StringType()),
        T.StructField("path", T.StringType()),
        T.StructField("day", T.DateType()),
        T.StructField("end_day", T.DateType()),
    ]
)


def write_partitioned(table: DataFrame, output_root: str, name: str, full: bool) -> None:
    """Write `table` to OUTPUT/tables/NAME/day=.../, one file per day."""
    (
        table.repartition("day")
        .write.mode("overwrite")
        .option("partitionOverwriteMode", "static" if full else "dynamic")
        .partitionBy("day")
        .parquet(storage.join(output_root, "tables", name))
    )


def write_whole(table: DataFrame, output_root: str, name: str) -> None:
    """Replace OUTPUT/tables/NAME/ with `table` (for small tables derived from the others)."""
    table.coalesce(1).write.mode("overwrite").parquet(storage.join(output_root, "tables", name))


def write_catalog(
    spark: SparkSession, output_root: str, files: Iterable[tuple[str, str, dt.date, dt.date]]
) -> None:
    """Record the input files processed, as (table, path, day, end_day) rows."""
    rows = list(files)
    frame = spark.createDataFrame(rows, _CATALOG).coalesce(1)
    frame.write.mode("overwrite").parquet(storage.join(output_root, "_state", "input_files"))
