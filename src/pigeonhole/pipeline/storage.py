"""File operations on any Hadoop-style URI (file:, hdfs:, s3a: ...), through Spark's JVM.

The report must read and write wherever Spark can, so it never touches paths with Python's
`open`: listing input files, reading `_schema.json` and writing `index.html` all go through
Hadoop's `FileSystem` of the session that runs the job.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def _fs_path(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm: Any = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr, unused-ignore]
    return path.getFileSystem(conf), path


def qualify(spark: SparkSession, uri: str) -> str:
    """The fully qualified form of `uri` (`/x` -> `file:/x`), without a trailing slash."""
    fs, path = _fs_path(spark, uri)
    return str(fs.makeQualified(path).toString()).rstrip("/")


def join(uri: str, *parts: str) -> str:
    """`uri/part/part`, for URIs as well as plain paths."""
    return "/".join([uri.rstrip("/"), *parts])


def exists(spark: SparkSession, uri: str) -> bool:
    fs, path = _fs_path(spark, uri)
    return bool(fs.exists(path))


def list_files(spark: SparkSession, uri: str, suffix: str = ".parquet") -> list[str]:
    """Qualified URIs of the files under `uri` ending in `suffix`, skipping `_`/`.` names.

    The listing is one Spark job (the `binaryFile` source with the content pruned away),
    so it is parallel on a cluster and costs no per-file round trip from Python; like every
    Spark read it ignores names starting with `_` or `.` (staging, journals, markers).
    """
    if not exists(spark, uri):
        return []
    files = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", f"*{suffix}")
        .load(uri)
        .select("path")
        .collect()
    )
    return sorted(str(row[0]) for row in files)


def read_text(spark: SparkSession, uri: str) -> str | None:
    """The whole file as text, or None if it does not exist."""
    if not exists(spark, uri):
        return None
    # not spark.read.text: Spark's file index skips names starting with `_`, like _schema.json
    fs, path = _fs_path(spark, uri)
    jvm: Any = spark.sparkContext._jvm
    stream = fs.open(path)
    try:
        data: bytes = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return data.decode()


def write_bytes(spark: SparkSession, uri: str, data: bytes) -> None:
    """Write `data` to a hidden temporary name beside `uri`, then rename it into place."""
    fs, path = _fs_path(spark, uri)
    jvm: Any = spark.sparkContext._jvm
    tmp = jvm.org.apache.hadoop.fs.Path(path.getParent(), "." + str(path.getName()) + ".tmp")
    out = fs.create(tmp, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()
    if fs.exists(path):
        fs.delete(path, False)
    if not fs.rename(tmp, path):
        raise OSError(f"could not rename {tmp} to {uri}")
