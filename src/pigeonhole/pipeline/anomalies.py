"""Abuse and outage signals: periods whose volume or scary/crowded rate stands out.

How a period is judged (documented in docs/pipeline.md, "Abuse signals"):

* The baseline of a day is the same scope's previous `day_window` days; the baseline of an
  hour is the same hour of the day over the previous `hour_window` days (traffic is
  diurnal, so 03:00 is compared with other 03:00s). Periods with no data in a per-app
  scope are absent from its baseline; the all-apps scope has every period.
* A value stands out when it lies beyond Tukey's far-out fence of the baseline,
  Q3 + 3·IQR (or Q1 − 3·IQR for low volume), where the IQR is at least a floor (1
  percentage point for rates, 10% of the median for volumes) so a flat baseline does not
  flag tiny changes.
* Only with at least `min_baseline` baseline periods, and enough events behind the value
  (`min_events_day` / `min_events_hour`: scary or crowded mailboxes for the rates,
  finished mailboxes for the volumes) so one unlucky transfer in a quiet hour is no alarm.
* Low volume is judged only for periods that ended before the data's watermark (the
  export's last sample, `current.updated`): the latest day is usually still being written.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pigeonhole.pipeline.periods import DAY_US, HOUR_US


@dataclass(frozen=True)
class AnomalyRules:
    """The thresholds above; the defaults are what the report uses."""

    day_window: int = 28
    hour_window: int = 14
    min_baseline: int = 7
    min_events_day: int = 30
    min_events_hour: int = 20
    fence_iqrs: float = 3.0
    rate_floor: float = 0.01
    volume_floor: float = 0.1


_OUTPUT = (
    "day",
    "hour",
    "app_id",
    "signal",
    "value",
    "events",
    "baseline_q1",
    "baseline_median",
    "baseline_q3",
    "fence",
    "baseline_periods",
)


def find_anomalies(
    daily: DataFrame, hourly: DataFrame, rules: AnomalyRules, watermark_us: int | None
) -> DataFrame:
    """`daily_summary` and `hourly_summary` -> the flagged periods, one row per signal.

    `watermark_us` (UNIX microseconds) is when the data ends; None means it is complete.
    """
    day_end = (F.unix_date("day") + 1).cast("long") * DAY_US
    hour_end = F.unix_date("day").cast("long") * DAY_US + (F.col("hour") + 1) * HOUR_US
    complete = (
        (lambda end: F.lit(True))
        if watermark_us is None
        else (lambda end: end <= F.lit(watermark_us))
    )
    day_rows = _judge(
        daily.withColumn("hour", F.lit(None).cast("int")),
        ["app_id"],
        rules.day_window,
        rules.min_events_day,
        rules,
        complete(day_end),
    )
    hour_rows = _judge(
        hourly,
        ["app_id", "hour"],
        rules.hour_window,
        rules.min_events_hour,
        rules,
        complete(hour_end),
    )
    return day_rows.unionByName(hour_rows).select(*_OUTPUT)


def _judge(
    summary: DataFrame,
    scope: list[str],
    window: int,
    min_events: int,
    rules: AnomalyRules,
    complete: Column,
) -> DataFrame:
    metrics = reduce(
        DataFrame.unionByName,
        [
            _metric(
                summary.where(complete),
                "volume_low",
                F.col("finished").cast("double"),
                F.col("finished"),
            ),
            _metric(summary, "volume", F.col("finished").cast("double"), F.col("finished")),
            _metric(summary, "scary_rate", F.col("scary_rate"), F.col("scary")),
            _metric(summary, "crowded_rate", F.col("crowded_rate"), F.col("crowded")),
        ],
    )
    baseline = Window.partitionBy(*scope, "metric").orderBy("day_n").rangeBetween(-window, -1)
    quartiles = F.percentile_approx("value", [0.25, 0.5, 0.75], 10_000).over(baseline)
    judged = metrics.select(
        "*", quartiles.alias("q"), F.count("value").over(baseline).alias("baseline_periods")
    )
    spread = F.col("q")[2] - F.col("q")[0]
    volume = F.col("metric").startswith("volume")
    floor = F.when(volume, F.col("q")[1] * rules.volume_floor).otherwise(F.lit(rules.rate_floor))
    width = F.lit(rules.fence_iqrs) * F.greatest(spread, floor)
    high = _flag(
        judged.where(F.col("metric") != "volume_low"),
        F.concat(F.col("metric"), F.lit("_high")),
        F.col("q")[2] + width,
        F.col("value") > F.col("fence"),
        F.col("events") >= min_events,
    )
    low = _flag(
        judged.where(F.col("metric") == "volume_low"),
        F.lit("volume_low"),
        F.col("q")[0] - width,
        F.col("value") < F.col("fence"),
        F.col("q")[1] >= min_events,
    )
    return high.unionByName(low).where(F.col("baseline_periods") >= rules.min_baseline)


def _metric(summary: DataFrame, name: str, value: Column, events: Column) -> DataFrame:
    return summary.select(
        "day",
        "hour",
        "app_id",
        F.unix_date("day").alias("day_n"),
        F.lit(name).alias("metric"),
        value.alias("value"),
        events.cast("long").alias("events"),
    )


def _flag(
    judged: DataFrame, signal: Column, fence: Column, beyond: Column, enough: Column
) -> DataFrame:
    fenced = judged.withColumns(
        {
            "fence": fence,
            "signal": signal,
            "baseline_q1": F.col("q")[0],
            "baseline_median": F.col("q")[1],
            "baseline_q3": F.col("q")[2],
        }
    )
    return fenced.where(beyond & enough).select(*_OUTPUT)
