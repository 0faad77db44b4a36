"""Typed configuration of the pipeline's three commands: the CLI builds these, passes them down."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ExportConfig:
    """`export-usage`: where the server's usage database is and where the dataset goes."""

    db_path: Path
    out_dir: Path
    #: rows read from SQLite per page; bounds the exporter's memory
    page_rows: int = 200_000
    #: `db_path` is the reference server's usage database (v1 or v2), not ours
    reference: bool = False
    #: `db_path` is the reference transit relay's usage database (its `transit` rows)
    reference_transit: bool = False
    #: read the usage tables of this PostgreSQL store instead (`db_path` unused)
    store: str | None = None


@dataclass(frozen=True)
class DemoConfig:
    """`demo-data`: how much realistic usage to generate, and where."""

    out_dir: Path
    days: int = 30
    #: finished mailboxes (transfers) over the whole period
    transfers: int = 100_000
    #: the last day generated (UTC); the first is `days - 1` before it
    end_day: dt.date = dt.date(2026, 11, 22)
    seed: int = 5
    #: add a few abuse incidents (a code-guessing hour, a crowded burst) for the report to find
    incidents: bool = True


@dataclass(frozen=True)
class SparkConfig:
    """How to start Spark: the master URL and extra `spark.*` settings."""

    master: str = "local[*]"
    app_name: str = "pigeonhole-report"
    conf: Mapping[str, str] = field(default_factory=dict)
    #: directory for Spark's scratch files (spark.local.dir) and warehouse; None: Spark's default
    scratch_dir: Path | None = None


@dataclass(frozen=True)
class ReportConfig:
    """`report`: input dataset and output directory, as any Hadoop-style URI Spark accepts."""

    input_uri: str
    output_uri: str
    #: recompute every day instead of only the days that new input files touch
    full: bool = False
    #: draw hourly charts over at most this many of the latest days
    hourly_chart_days: int = 14
