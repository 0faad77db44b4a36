"""Shared vocabulary of the transforms: sessions, periods (day/hour) and the all-apps scope.

Times are handled as integer UNIX microseconds, so day and hour boundaries are exact and
independent of any time zone: `day` is the UTC date and `hour` the UTC hour of day.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

Grain = Literal["day", "hour"]
DAY_US = 86_400_000_000
HOUR_US = 3_600_000_000
_EPOCH = dt.date(1970, 1, 1)


def keys(grain: Grain) -> list[str]:
    """The period columns of a table at `grain`."""
    return ["day"] if grain == "day" else ["day", "hour"]


def period_columns(micros: str, grain: Grain) -> list[Column]:
    """`day` (and `hour`) of the UNIX-microsecond column `micros`."""
    day = F.date_from_unix_date(F.expr(f"CAST({micros} div {DAY_US} AS INT)")).alias("day")
    if grain == "day":
        return [day]
    return [day, F.expr(f"CAST(({micros} div {HOUR_US}) % 24 AS INT)").alias("hour")]


def day_number(day: dt.date) -> int:
    """Days since 1970-01-01."""
    return (day - _EPOCH).days


def to_sessions(rows: DataFrame) -> DataFrame:
    """Mailbox or nameplate rows -> sessions with start and end in UNIX microseconds.

    The end is `started + total_time`; the server blurs only `started`, so with
    --blur-usage both ends move down together by less than the blur.
    """
    start = F.unix_micros("started")
    return rows.select(
        "app_id",
        "result",
        start.alias("start_us"),
        (start + F.floor(F.col("total_time") * 1_000_000)).alias("end_us"),
        "waiting_time",
        "total_time",
    )


#: the scope number of all apps together in `app_scopes` codes (apps are numbered from 1)
ALL_APPS = 0


def app_scopes(sessions: DataFrame) -> DataFrame:
    """(app_id, scope): each app of `sessions` numbered from 1, in app_id order.

    Transforms that hand sessions to numpy (`applyInPandas`) send these small integers
    instead of app id strings, and join the names back onto their (few) result rows.
    """
    return (
        sessions.select("app_id")
        .distinct()
        .select("app_id", F.row_number().over(Window.orderBy("app_id")).alias("scope"))
    )
