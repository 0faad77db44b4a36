"""The report's transit day (pipeline/transit.py) on tiny hand-written relay records."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import DataFrame
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from pigeonhole.pipeline.schema import INPUT, TABLES
from pigeonhole.pipeline.transit import daily_transit

from .frames import DAY, at, summary_rows

NEXT = DAY + dt.timedelta(days=1)
MB = 1_000_000


def records(spark: Any, rows: list[tuple[float, float, float | None, int, str]]) -> DataFrame:
    """(start hour, total s, waiting s, bytes, mood) -> input `transit` rows."""
    data = [
        (i, at(start), total, waiting, size, mood, DAY)
        for i, (start, total, waiting, size, mood) in enumerate(rows, start=1)
    ]
    return spark.createDataFrame(data, INPUT["transit"])


def test_counts_bytes_and_moods_go_to_the_day_a_record_ended(spark: Any) -> None:
    """A pair across midnight counts (with its bytes) on the next day; every mood has its
    column, an unknown one lands in `other`; a day without records has zeros."""
    frame = records(
        spark,
        [
            (10.0, 60.0, 2.0, 40 * MB, "happy"),
            (11.0, 30.0, None, 0, "lonely"),
            (11.5, 1.0, None, 0, "errory"),
            (12.0, 5.0, None, 0, "redundant"),
            (12.5, 0.5, None, 0, "impatient"),
            (12.6, 0.1, None, 0, "empty"),
            (13.0, 1.0, None, 0, "surprised"),
            (23.5, 3600.0, 4.0, 900 * MB, "happy"),
        ],
    )
    got = daily_transit(frame, DAY, NEXT + dt.timedelta(days=1))
    assertSchemaEqual(got.schema, TABLES["daily_transit"])
    rows = {r["day"]: r for r in got.collect()}
    assert sorted(rows) == [DAY, NEXT, NEXT + dt.timedelta(days=1)]
    first, second, idle = rows[DAY], rows[NEXT], rows[NEXT + dt.timedelta(days=1)]
    assert (first["records"], first["pairs"], first["bytes"]) == (7, 1, 40 * MB)
    assert [first[m] for m in ("happy", "lonely", "errory", "redundant", "impatient")] == [
        1, 1, 1, 1, 1,
    ]  # fmt: skip
    assert (first["empty"], first["jilted"], first["other"]) == (1, 0, 1)
    assert (second["records"], second["pairs"], second["bytes"]) == (1, 1, 900 * MB)
    assert (idle["records"], idle["bytes"], idle["peak_pairs"], idle["waiting_p50"]) == (
        0, 0, 0, None,
    )  # fmt: skip


def test_times_and_peak_are_of_pairs_only(spark: Any) -> None:
    """Percentiles are the pairs' (a lonely record's long total time is left out); the
    peak counts pairs open at one instant, back-to-back pairs not overlapping, a pair
    carried over midnight counting on both days."""
    frame = records(
        spark,
        [
            (9.0, 3600.0, 1.0, MB, "happy"),  # 09:00-10:00
            (9.5, 600.0, 3.0, MB, "happy"),  # 09:30-09:40, overlaps the first
            (10.0, 60.0, 5.0, MB, "jilted"),  # starts as the first ends
            (9.0, 86_000.0, None, 0, "lonely"),  # open all day, never a pair
            (23.9, 7200.0, 2.0, MB, "happy"),  # into the next day
        ],
    )
    expected = summary_rows(
        spark,
        "daily_transit",
        [
            {
                "day": DAY, "records": 3, "pairs": 3, "bytes": 3 * MB, "happy": 2, "jilted": 1,
                "waiting_p50": 3.0, "waiting_p90": 5.0, "waiting_p99": 5.0,
                "total_p50": 600.0, "total_p90": 3600.0, "total_p99": 3600.0,
                "peak_pairs": 2,
            },
            {
                "day": NEXT, "records": 2, "pairs": 1, "bytes": MB, "happy": 1, "lonely": 1,
                "waiting_p50": 2.0, "waiting_p90": 2.0, "waiting_p99": 2.0,
                "total_p50": 7200.0, "total_p90": 7200.0, "total_p99": 7200.0,
                "peak_pairs": 1,
            },
        ],
    )  # fmt: skip
    assertDataFrameEqual(daily_transit(frame, DAY, NEXT), expected)


def test_no_records_gives_a_zero_row_per_day(spark: Any) -> None:
    got = daily_transit(spark.createDataFrame([], INPUT["transit"]), DAY, NEXT).collect()
    assert [(r["day"], r["records"], r["bytes"], r["peak_pairs"]) for r in got] == [
        (DAY, 0, 0, 0),
        (NEXT, 0, 0, 0),
    ]
