"""The usage data pipeline: export to Parquet, a Spark report, demo data.

`export_usage` and `generate` need only pyarrow and numpy; the report modules need PySpark,
pandas and matplotlib and are imported lazily by the CLI, so the exporter can run on a
server host without a JVM.
"""

from __future__ import annotations

from pigeonhole.pipeline.config import DemoConfig, ExportConfig, ReportConfig, SparkConfig
from pigeonhole.pipeline.dataset import SCHEMA_VERSION, CommitResult
from pigeonhole.pipeline.demo import generate
from pigeonhole.pipeline.export import ExportError, export_usage

__all__ = [
    "SCHEMA_VERSION",
    "CommitResult",
    "DemoConfig",
    "ExportConfig",
    "ExportError",
    "ReportConfig",
    "SparkConfig",
    "export_usage",
    "generate",
]
