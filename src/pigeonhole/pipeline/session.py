"""Starting Spark for the report: one builder, every static setting in one place.

Static settings (driver memory, JVM options, bind addresses) only take effect when a process
creates its first session, so they are all set here. In local mode the driver binds to
loopback only (nothing off the host needs to reach it), Python workers use this
interpreter, and everything runs in UTC (the dataset's days are UTC days).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from pigeonhole.pipeline.config import SparkConfig

#: The driver JVM of a local run is also the only executor, so it gets the throughput settings:
#: the full JIT (C1 then C2) and the parallel collector. The start-up trick of tiny test jobs
#: (`-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`, C1 only) makes a 1 M-row report much slower;
#: the tests pass it themselves through `SparkConfig.conf` (tests/pipeline/conftest.py).
LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC -Duser.timezone=UTC"
#: start-up options for tiny jobs (tests): ~20% faster start, much slower on real data
FAST_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Duser.timezone=UTC"


def build_spark(config: SparkConfig) -> SparkSession:
    """Create (or return the process's existing) SparkSession for `config`."""
    local = config.master.startswith("local")
    if local:
        # the JVM reads these at start; on a cluster the driver must stay reachable instead
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(config.master)
        .appName(config.app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if local:
        builder = (
            builder.config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.extraJavaOptions", LOCAL_JAVA_OPTIONS)
            .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 1)))
            # listing a few hundred files is faster in the driver than as a Spark job
            .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "10000")
        )
    if config.scratch_dir is not None:
        builder = builder.config("spark.local.dir", str(config.scratch_dir)).config(
            "spark.sql.warehouse.dir", str(config.scratch_dir / "warehouse")
        )
    for key, value in config.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
