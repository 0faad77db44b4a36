"""The report job: plan the increment, extract, transform, load, then draw the page.

`compute_tables` is the whole computation as pure DataFrame wiring; `run_report` adds the
I/O around it (and is the only place that knows the order of the steps).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pigeonhole.pipeline import extract, load, page, storage
from pigeonhole.pipeline.anomalies import AnomalyRules, find_anomalies
from pigeonhole.pipeline.clients import binds_per_side, clients_from_sides, hourly_connections
from pigeonhole.pipeline.concurrency import daily_peaks, hourly_peaks
from pigeonhole.pipeline.config import ReportConfig
from pigeonhole.pipeline.increment import plan_run
from pigeonhole.pipeline.periods import DAY_US, HOUR_US, to_sessions
from pigeonhole.pipeline.progress import Progress
from pigeonhole.pipeline.results import daily_from_hourly, results_by_period
from pigeonhole.pipeline.schema import TABLES
from pigeonhole.pipeline.summary import summarize
from pigeonhole.pipeline.timing import timing_by_period
from pigeonhole.pipeline.transit import daily_transit

#: the tables `compute_tables` returns, in the order they are written
PARTITIONED = tuple(name for name in TABLES if name != "anomalies")


@dataclass(frozen=True)
class ReportOutcome:
    """What a run did."""

    first_day: dt.date | None
    last_day: dt.date | None
    new_files: int
    index_uri: str


def compute_tables(
    inputs: Mapping[str, DataFrame], first_day: dt.date, last_day: dt.date
) -> dict[str, DataFrame]:
    """Input tables -> every partitioned output table, limited to [first_day, last_day].

    `inputs` must hold every row that touches those days (see `increment`); rows of
    other days may be present and only serve as carry-in.
    """
    mail, plates = to_sessions(inputs["mailboxes"]), to_sessions(inputs["nameplates"])
    # every intermediate that feeds several tables is cached, and the daily counts are the
    # sums of the (small, cached) hourly ones, so each input is read as few times as possible
    hourly = results_by_period(mail, "hour").cache()
    results = {"hour": hourly, "day": daily_from_hourly(hourly).cache()}
    hourly_plates = results_by_period(plates, "hour").cache()
    # one shuffle of the raw binds serves both client tables (distinct sides per hour and
    # per day)
    sides = binds_per_side(inputs["client_versions"]).cache()
    peaks = {
        "mail": hourly_peaks(mail, first_day, last_day).cache(),
        "plates": hourly_peaks(plates, first_day, last_day).cache(),
    }
    tables = {
        "daily_results": results["day"],
        "hourly_results": results["hour"],
        "daily_nameplate_results": daily_from_hourly(hourly_plates),
        "hourly_nameplate_results": hourly_plates,
        "daily_summary": summarize(
            results["day"],
            timing_by_period(mail, "day"),
            daily_peaks(peaks["mail"]),
            daily_peaks(peaks["plates"]),
            "day",
        ),
        "hourly_summary": summarize(
            results["hour"], timing_by_period(mail, "hour"), peaks["mail"], peaks["plates"], "hour"
        ),
        "daily_clients": clients_from_sides(sides, "day"),
        "hourly_clients": clients_from_sides(sides, "hour"),
        "hourly_connections": hourly_connections(inputs["connection_counts"]),
        "daily_transit": daily_transit(inputs["transit"], first_day, last_day),
    }
    in_range = F.col("day").between(F.lit(first_day), F.lit(last_day))
    return {name: frame.where(in_range) for name, frame in tables.items()}


def run_report(
    spark: SparkSession, config: ReportConfig, progress: Progress, now: Callable[[], dt.datetime]
) -> ReportOutcome:
    """Bring OUTPUT up to date with INPUT; recompute only the days new input touches."""
    source = storage.qualify(spark, config.input_uri)
    target = storage.qualify(spark, config.output_uri)
    index = storage.join(target, "index.html")
    progress.start(len(PARTITIONED) + 3)
    progress.step("checking the input and planning")
    extract.check_dataset(spark, source)
    current = extract.read_current(spark, source)
    known = [] if config.full else extract.read_catalog(spark, target)
    plan = plan_run(spark, source, known)
    if plan.first_day is not None and plan.last_day is not None:
        inputs = {t: extract.read_table(spark, source, t, uris) for t, uris in plan.reads.items()}
        tables = compute_tables(inputs, plan.first_day, plan.last_day)
        for name in PARTITIONED:
            progress.step(f"{name} ({plan.first_day} to {plan.last_day})")
            load.write_partitioned(tables[name], target, name, config.full)
        spark.catalog.clearCache()
    else:
        for name in PARTITIONED:
            progress.step(f"{name}: no new input")
    progress.step("anomalies")
    daily, hourly = (
        extract.read_output(spark, target, n) for n in ("daily_summary", "hourly_summary")
    )
    flagged = find_anomalies(daily, hourly, AnomalyRules(), current.updated_us)
    load.write_whole(flagged, target, "anomalies")
    load.write_catalog(spark, target, plan.catalog)
    progress.step("drawing the report page")
    data = _page_data(spark, target, config.hourly_chart_days, current, now())
    storage.write_bytes(spark, index, page.render(data))
    progress.finish()
    return ReportOutcome(plan.first_day, plan.last_day, plan.new_files, index)


def _page_data(
    spark: SparkSession,
    target: str,
    hourly_days: int,
    current: extract.Current,
    generated: dt.datetime,
) -> page.ReportData:
    """Collect the small aggregates the page draws (everything else stays in Spark).

    Periods that end after the data's watermark (the latest day, usually still being
    written) stay in the tables but are left out of the charts, which they would distort.
    """

    def table(name: str) -> DataFrame:
        frame = extract.read_output(spark, target, name)
        if current.updated_us is None or name == "anomalies":
            return frame
        ends = F.unix_date("day").cast("long") * DAY_US + (
            (F.col("hour") + 1) * HOUR_US if "hour" in frame.columns else F.lit(DAY_US)
        )
        return frame.where(ends <= F.lit(current.updated_us))

    daily = table("daily_summary")
    all_apps = daily.where(F.col("app_id").isNull())
    last = all_apps.agg(F.max("day")).first()
    since = (last[0] if last and last[0] else generated.date()) - dt.timedelta(days=hourly_days)
    recent = F.col("day") > F.lit(since)
    apps = (
        daily.where(F.col("app_id").isNotNull())
        .groupBy("app_id")
        .agg(F.sum("finished").alias("finished"), F.sum("happy").alias("happy"))
        .select("app_id", "finished", (F.col("happy") / F.col("finished")).alias("success_rate"))
        .orderBy(F.desc("finished"), "app_id")
        .limit(20)
    )
    clients = (
        table("daily_clients")
        .groupBy("day", "implementation", "version")
        .agg(F.sum("binds").alias("binds"))
    )
    return page.ReportData(
        daily=_pandas(all_apps),
        apps=_pandas(apps),
        hourly=_pandas(table("hourly_summary").where(F.col("app_id").isNull() & recent)),
        connections=_pandas(table("hourly_connections").where(recent)),
        clients=_pandas(clients),
        transit=_pandas(table("daily_transit")),
        anomalies=_pandas(table("anomalies")),
        blur_time=current.blur_time,
        watermark=None
        if current.updated_us is None
        else dt.datetime.fromtimestamp(current.updated_us / 1e6, dt.UTC),
        generated=generated,
        tables={
            name: [
                (f.name, f.dataType.simpleString(), f.metadata.get("doc", ""))
                for f in schema.fields
            ]
            for name, schema in TABLES.items()
        },
    )


def _pandas(frame: DataFrame) -> pd.DataFrame:
    return frame.toPandas()
