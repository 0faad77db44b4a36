"""Fixtures for the usage pipeline: one SparkSession for the whole run, usage databases.

The Spark tests are skipped (with the reason) when PySpark or a Java runtime is missing,
so the rest of the project's suite stays runnable without a JVM.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pipeline.report_run import ReportRun

try:
    import pyspark  # noqa: F401
except ImportError:  # only the exporter's tests can run; the others import pyspark
    collect_ignore_glob = ["test_[!e]*.py", "frames.py", "duckdb_reference.py"]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one SparkSession of the test run, with the fast settings for 2 cores."""
    pytest.importorskip("pyspark", reason="PySpark is not installed")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime for Spark")
    from pigeonhole.pipeline.config import SparkConfig
    from pigeonhole.pipeline.session import FAST_START_JAVA_OPTIONS, build_spark

    session = build_spark(
        SparkConfig(
            master="local[2]",
            app_name="pigeonhole-tests",
            scratch_dir=tmp_path_factory.mktemp("spark"),
            conf={
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
                "spark.driver.memory": "1g",
                # C1 only and the serial collector: tiny jobs, so start-up is what counts
                "spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS,
            },
        )
    )
    yield session
    session.stop()


FIRST_END, SECOND_END = dt.date(2026, 11, 18), dt.date(2026, 11, 21)


@pytest.fixture(scope="session")
def report_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> ReportRun:
    """Demo data for 12 days -> report; 3 more days -> report again (incremental)."""
    from click.testing import CliRunner

    from pigeonhole.cli.usage import report
    from pigeonhole.pipeline import DemoConfig, generate

    root = tmp_path_factory.mktemp("report")
    data, out = root / "data", root / "out"
    args = ["--input", str(data), "--output", str(out), "--master", "local[2]"]
    generate(DemoConfig(out_dir=data, days=12, transfers=3000, end_day=FIRST_END, seed=1))
    first = CliRunner().invoke(report, args)
    assert first.exit_code == 0, first.output
    tables = out / "tables"
    before = {str(p.relative_to(tables)): p.stat().st_mtime for p in tables.rglob("*.parquet")}
    generate(DemoConfig(out_dir=data, days=3, transfers=750, end_day=SECOND_END, seed=2))
    second = CliRunner().invoke(report, args)
    assert second.exit_code == 0, second.output
    return ReportRun(data, out, first.output, second.output, before)
