"""Spark schemas: the input dataset (read with these, never inferred) and every output table.

Each output table is described once here, column by column, with the doc that
`docs/pipeline.md` repeats; a test checks that the two agree and that every transform
returns exactly its table's schema. Conventions: `day` is a UTC date and the partition
column, `hour` is the UTC hour of day (0-23), and in tables with non-additive metrics
(rates, percentiles, peaks) a row with `app_id` NULL covers all apps together.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import types as T

_S, _L, _D, _I = T.StringType(), T.LongType(), T.DoubleType(), T.IntegerType()
_TS, _DATE, _BOOL = T.TimestampType(), T.DateType(), T.BooleanType()


def _struct(*fields: tuple[str, T.DataType, str]) -> T.StructType:
    return T.StructType(
        [
            T.StructField(name, kind, nullable=True, metadata={"doc": doc})
            for name, kind, doc in fields
        ]
    )


_DAY = ("day", _DATE, "UTC date")
_HOUR = ("hour", _I, "UTC hour of the day, 0-23")
_APP = ("app_id", _S, "AppID")
_APP_ALL = ("app_id", _S, "AppID; NULL for all apps together")

#: The input tables, as the exporter writes them (see `pipeline.dataset`), plus `day`.
INPUT: Mapping[str, T.StructType] = {
    "mailboxes": _struct(
        ("id", _L, ""),
        ("app_id", _S, ""),
        ("for_nameplate", _BOOL, ""),
        ("started", _TS, ""),
        ("waiting_time", _D, ""),
        ("total_time", _D, ""),
        ("result", _S, ""),
        ("day", _DATE, ""),
    ),
    "nameplates": _struct(
        ("id", _L, ""),
        ("app_id", _S, ""),
        ("started", _TS, ""),
        ("waiting_time", _D, ""),
        ("total_time", _D, ""),
        ("result", _S, ""),
        ("day", _DATE, ""),
    ),
    "client_versions": _struct(
        ("id", _L, ""),
        ("app_id", _S, ""),
        ("side", _S, ""),
        ("connect_time", _TS, ""),
        ("implementation", _S, ""),
        ("version", _S, ""),
        ("day", _DATE, ""),
    ),
    "connection_counts": _struct(
        ("id", _L, ""),
        ("sampled", _TS, ""),
        ("connections", _L, ""),
        ("bound", _L, ""),
        ("subscribed", _L, ""),
        ("nameplates", _L, ""),
        ("mailboxes", _L, ""),
        ("day", _DATE, ""),
    ),
    "transit": _struct(
        ("id", _L, ""),
        ("started", _TS, ""),
        ("total_time", _D, ""),
        ("waiting_time", _D, ""),
        ("total_bytes", _L, ""),
        ("result", _S, ""),
        ("day", _DATE, ""),
    ),
}
CURRENT = _struct(
    ("rebooted", _TS, ""), ("updated", _TS, ""), ("blur_time", _L, ""), ("connections", _L, "")
)

#: Sessions as the transforms see them: one row per finished mailbox or nameplate.
SESSIONS = _struct(
    _APP,
    ("result", _S, "result (mood)"),
    ("start_us", _L, "start, UNIX microseconds"),
    ("end_us", _L, "end (start + total_time), UNIX microseconds"),
    ("waiting_time", _D, "seconds, NULL if one side"),
    ("total_time", _D, "seconds"),
)


def _results(*period: tuple[str, T.DataType, str]) -> T.StructType:
    return _struct(
        *period,
        _APP,
        ("result", _S, "result (mood) as recorded by the server"),
        ("count", _L, "finished in this period (deleted, i.e. start + total_time, in it)"),
        ("started_count", _L, "started in this period"),
    )


def _summary(*period: tuple[str, T.DataType, str]) -> T.StructType:
    moods = ("happy", "lonely", "scary", "errory", "pruney", "crowded", "quiet")
    return _struct(
        *period,
        _APP_ALL,
        ("started", _L, "mailboxes started in the period"),
        ("finished", _L, "mailboxes finished in the period (all results)"),
        *((m, _L, f"finished with result {m}") for m in moods),
        ("other", _L, "finished with a result not listed above"),
        ("success_rate", _D, "happy / finished; NULL when nothing finished"),
        ("scary_rate", _D, "scary / finished; NULL when nothing finished"),
        ("crowded_rate", _D, "crowded / finished; NULL when nothing finished"),
        ("waited", _L, "finished mailboxes with a waiting time (two sides came)"),
        *(
            (f"waiting_p{p}", _D, f"waiting time p{p}, seconds (exact, nearest rank)")
            for p in (50, 90, 99)
        ),
        *(
            (f"total_p{p}", _D, f"total time p{p}, seconds (exact, nearest rank)")
            for p in (50, 90, 99)
        ),
        ("peak_mailboxes", _L, "most mailboxes open at once during the period"),
        ("peak_nameplates", _L, "most nameplates claimed at once during the period"),
    )


def _clients(*period: tuple[str, T.DataType, str]) -> T.StructType:
    return _struct(
        *period,
        _APP,
        ("implementation", _S, "client implementation; NULL if not sent"),
        ("version", _S, "client version; NULL if not sent"),
        ("binds", _L, "`bind` messages"),
        ("sides", _L, "distinct sides that bound"),
    )


#: the transit relay's moods, a column each in `daily_transit` (the reference's vocabulary)
TRANSIT_MOODS = ("happy", "jilted", "lonely", "redundant", "errory", "impatient", "empty")


def _transit(*period: tuple[str, T.DataType, str]) -> T.StructType:
    return _struct(
        *period,
        ("records", _L, "relay records that ended in the period (every mood)"),
        ("pairs", _L, "of those, pairs (happy or jilted)"),
        ("bytes", _L, "bytes relayed by those records, both directions (blurred: rounded up)"),
        *((m, _L, f"records with mood {m}") for m in TRANSIT_MOODS),
        ("other", _L, "records with a mood not listed above"),
        *(
            (f"waiting_p{p}", _D, f"pairs' waiting time p{p}, seconds (exact, nearest rank)")
            for p in (50, 90, 99)
        ),
        *(
            (f"total_p{p}", _D, f"pairs' total time p{p}, seconds (exact, nearest rank)")
            for p in (50, 90, 99)
        ),
        ("peak_pairs", _L, "most pairs relaying at once during the period"),
    )


_DAILY, _HOURLY = (_DAY,), (_DAY, _HOUR)

#: Every table the report writes under OUTPUT/tables/NAME/.
TABLES: Mapping[str, T.StructType] = {
    "daily_results": _results(*_DAILY),
    "hourly_results": _results(*_HOURLY),
    "daily_nameplate_results": _results(*_DAILY),
    "hourly_nameplate_results": _results(*_HOURLY),
    "daily_summary": _summary(*_DAILY),
    "hourly_summary": _summary(*_HOURLY),
    "daily_clients": _clients(*_DAILY),
    "hourly_clients": _clients(*_HOURLY),
    "hourly_connections": _struct(
        *_HOURLY,
        ("samples", _L, "connection-count samples in the hour"),
        ("max_connections", _L, "most open WebSocket connections sampled"),
        ("max_bound", _L, "most bound connections sampled"),
        ("max_subscribed", _L, "most connections with an open mailbox sampled"),
        ("max_nameplates", _L, "most nameplates alive sampled"),
        ("max_mailboxes", _L, "most mailboxes alive sampled"),
    ),
    "daily_transit": _transit(*_DAILY),
    "anomalies": _struct(
        _DAY,
        ("hour", _I, "UTC hour for hourly signals; NULL for daily ones"),
        _APP_ALL,
        ("signal", _S, "volume_high | volume_low | scary_rate_high | crowded_rate_high"),
        ("value", _D, "the period's value (finished count or rate)"),
        ("events", _L, "finished mailboxes behind the value (scary or crowded ones for rates)"),
        ("baseline_q1", _D, "first quartile of the baseline periods"),
        ("baseline_median", _D, "median of the baseline periods"),
        ("baseline_q3", _D, "third quartile of the baseline periods"),
        ("fence", _D, "the threshold the value crossed"),
        ("baseline_periods", _L, "how many baseline periods there were"),
    ),
}
