"""`export-usage`, `report` and `demo-data`: the usage pipeline's commands.

Each command builds its typed config from the options and hands it to `pigeonhole.pipeline`;
the Spark modules are imported only by `report`, so the other two start without a JVM.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import click

from pigeonhole import pipeline


@click.command("export-usage")
@click.option(
    "--data-dir",
    default=None,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The server's data directory; DATA_DIR/usage.sqlite is read (read-only).",
)
@click.option(
    "--store",
    default=None,
    metavar="postgresql://USER@HOST:PORT/DBNAME",
    help="Instead: the PostgreSQL store a server keeps its state in (serve --store).",
)
@click.option(
    "--reference-usage-db",
    default=None,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Instead: the reference server's usage database (its --usage-db), read-only;"
    " safe while it runs.",
)
@click.option(
    "--reference-transit-usage-db",
    default=None,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Instead: the reference transit relay's usage database (its --usage-db),"
    " read-only, as the transit table; safe while it runs.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Dataset directory (created); new rows are added to it incrementally.",
)
@click.option(
    "--page-rows",
    default=200_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows read from SQLite at a time (bounds memory).",
)
def export_usage(
    data_dir: Path | None,
    store: str | None,
    reference_usage_db: Path | None,
    reference_transit_usage_db: Path | None,
    out_dir: Path,
    page_rows: int,
) -> None:
    """Export finished usage records to day-partitioned Parquet; safe while the server runs."""
    sources = (data_dir, store, reference_usage_db, reference_transit_usage_db)
    if sum(x is not None for x in sources) != 1:
        raise click.UsageError(
            "give exactly one of --data-dir, --store, --reference-usage-db and"
            " --reference-transit-usage-db"
        )
    config = pipeline.ExportConfig(
        db_path=reference_usage_db
        or reference_transit_usage_db
        or (data_dir or Path(".")) / "usage.sqlite",
        out_dir=out_dir,
        page_rows=page_rows,
        reference=reference_usage_db is not None,
        reference_transit=reference_transit_usage_db is not None,
        store=store,
    )
    try:
        result = pipeline.export_usage(config)
    except pipeline.ExportError as error:
        raise click.ClickException(str(error)) from error
    click.echo(
        f"exported {len(result.files)} new file(s) to {out_dir}; "
        + ", ".join(f"{t} up to id {i}" for t, i in result.cursor.items())
    )


@click.command("report")
@click.option(
    "--input",
    "input_uri",
    required=True,
    help="Usage dataset (from export-usage or demo-data): a path or Hadoop URI.",
)
@click.option(
    "--output",
    "output_uri",
    required=True,
    help="Report directory (path or Hadoop URI): index.html and tables/NAME/.",
)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master URL, e.g. local[*], spark://host:7077, yarn.",
)
@click.option(
    "--conf",
    "conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra Spark setting, e.g. spark.driver.memory=4g (repeatable).",
)
@click.option("--full", is_flag=True, help="Recompute every day, not only new input.")
@click.option("--quiet", is_flag=True, help="Do not show progress.")
def report(
    input_uri: str, output_uri: str, master: str, conf: tuple[str, ...], full: bool, quiet: bool
) -> None:
    """Compute the usage tables and the HTML report with Spark (only new days by default)."""
    from pigeonhole.pipeline.extract import DatasetError
    from pigeonhole.pipeline.job import run_report
    from pigeonhole.pipeline.progress import ConsoleProgress, SilentProgress
    from pigeonhole.pipeline.session import build_spark

    settings = dict(_setting(item) for item in conf)
    spark = build_spark(pipeline.SparkConfig(master=master, conf=settings))
    progress = SilentProgress() if quiet else ConsoleProgress(spark.sparkContext, sys.stderr)
    config = pipeline.ReportConfig(input_uri=input_uri, output_uri=output_uri, full=full)
    try:
        outcome = run_report(spark, config, progress, now=lambda: dt.datetime.now(dt.UTC))
    except DatasetError as error:
        raise click.ClickException(str(error)) from error
    if outcome.first_day is None:
        click.echo(f"no new input; report page refreshed: {outcome.index_uri}")
    else:
        click.echo(
            f"recomputed {outcome.first_day} to {outcome.last_day} from "
            f"{outcome.new_files} new file(s); report: {outcome.index_uri}"
        )


@click.command("demo-data")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Dataset directory.",
)
@click.option(
    "--days", default=30, show_default=True, type=click.IntRange(min=1), help="Days of usage."
)
@click.option(
    "--transfers",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Finished mailboxes over all the days.",
)
@click.option(
    "--end",
    "end_day",
    default=None,
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Last day (UTC)  [default: yesterday]",
)
@click.option("--seed", default=5, show_default=True, type=int, help="Random seed.")
def demo_data(
    out_dir: Path, days: int, transfers: int, end_day: dt.datetime | None, seed: int
) -> None:
    """Generate realistic usage in the export-usage layout, to try the report without a server."""
    last = end_day.date() if end_day else dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    config = pipeline.DemoConfig(
        out_dir=out_dir, days=days, transfers=transfers, end_day=last, seed=seed
    )
    result = pipeline.generate(config)
    click.echo(
        f"wrote {len(result.files)} file(s) to {out_dir}: "
        + ", ".join(f"{n} {t}" for t, n in result.cursor.items())
    )


def _setting(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--conf")
    return key.strip(), value.strip()
