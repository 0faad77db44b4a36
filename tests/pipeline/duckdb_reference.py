"""The report's metrics computed independently in DuckDB SQL, for the parity test and bench.

Written from the definitions in docs/pipeline.md, not from the Spark code: peaks use one
running sum per scope over the whole history with a zero tick at every hour start (no
hourly segments), percentiles use DuckDB's exact `quantile_disc`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb

DAY_US, HOUR_US = 86_400_000_000, 3_600_000_000
_EPOCH = dt.date(1970, 1, 1)


def _day(us: str) -> str:
    return f"(DATE '1970-01-01' + CAST({us} // {DAY_US} AS INTEGER))"


def _hour(us: str) -> str:
    return f"CAST(({us} // {HOUR_US}) % 24 AS INTEGER)"


def connect(root: str) -> duckdb.DuckDBPyConnection:
    """A connection with views `mail`, `plates` (sessions), `binds` and `samples` on ROOT,
    and `relay` (the transit records) when the dataset has them."""
    con = duckdb.connect()
    for view, table in (("mail", "mailboxes"), ("plates", "nameplates")):
        con.execute(f"""
            CREATE VIEW {view} AS SELECT app_id, result, epoch_us(started) AS s,
                epoch_us(started) + CAST(floor(total_time * 1000000) AS BIGINT) AS e,
                waiting_time, total_time
            FROM read_parquet('{root}/{table}/*/*.parquet', hive_partitioning = false)""")
    con.execute(f"""CREATE VIEW binds AS SELECT * FROM read_parquet(
        '{root}/client_versions/*/*.parquet', hive_partitioning = false)""")
    con.execute(f"""CREATE VIEW samples AS SELECT * FROM read_parquet(
        '{root}/connection_counts/*/*.parquet', hive_partitioning = false)""")
    if (Path(root) / "transit").is_dir():
        con.execute(f"""
            CREATE VIEW relay AS SELECT result, epoch_us(started) AS s,
                epoch_us(started) + CAST(floor(total_time * 1000000) AS BIGINT) AS e,
                waiting_time, total_time, total_bytes
            FROM read_parquet('{root}/transit/*/*.parquet', hive_partitioning = false)""")
    return con


def results(con: duckdb.DuckDBPyConnection, view: str, hourly: bool) -> duckdb.DuckDBPyRelation:
    """(day[, hour], app_id, result, count, started_count): finished and started per period."""

    def period(us: str) -> str:
        return f"{_day(us)} AS day" + (f", {_hour(us)} AS hour" if hourly else "")

    return con.sql(f"""
        SELECT * EXCLUDE (fin, st), sum(fin) AS count, sum(st) AS started_count FROM (
            SELECT {period("s")}, app_id, result, 0 AS fin, 1 AS st FROM {view}
            UNION ALL
            SELECT {period("e")}, app_id, result, 1 AS fin, 0 AS st FROM {view})
        GROUP BY ALL""")


def timing(con: duckdb.DuckDBPyConnection, hourly: bool) -> duckdb.DuckDBPyRelation:
    """Per (period, app_id or NULL for all): waited and exact p50/p90/p99 by finish time."""
    keys = "day, hour" if hourly else "day"
    period = f"{_day('e')} AS day" + (f", {_hour('e')} AS hour" if hourly else "")
    return con.sql(f"""
        SELECT {keys}, app_id, count(waiting_time) AS waited,
            quantile_disc(waiting_time, [0.5, 0.9, 0.99]) AS waiting,
            quantile_disc(total_time, [0.5, 0.9, 0.99]) AS total
        FROM (SELECT {period}, app_id, waiting_time, total_time FROM mail)
        GROUP BY GROUPING SETS (({keys}, app_id), ({keys}))""")


def peaks(
    con: duckdb.DuckDBPyConnection, view: str, first: dt.date, last: dt.date
) -> duckdb.DuckDBPyRelation:
    """(day, hour, app_id, peak) for every hour of [first, last]; app_id NULL = all apps."""
    lo = (first - _EPOCH).days * DAY_US
    hi = ((last - _EPOCH).days + 1) * DAY_US
    return con.sql(f"""
        WITH ev AS (
            SELECT app_id, s AS t, 1 AS d FROM {view} WHERE e > s
            UNION ALL SELECT app_id, e AS t, -1 AS d FROM {view} WHERE e > s),
        scoped AS (SELECT app_id, t, d FROM ev UNION ALL SELECT NULL, t, d FROM ev),
        apps AS (SELECT DISTINCT app_id FROM scoped),
        ticks AS (SELECT apps.app_id, r.range AS t, 0 AS d
                  FROM apps CROSS JOIN range({lo}, {hi}, {HOUR_US}) r),
        points AS (SELECT app_id, t, sum(d) AS d
                   FROM (SELECT * FROM scoped UNION ALL SELECT * FROM ticks) GROUP BY ALL),
        levels AS (SELECT app_id, t, sum(d) OVER (
                       PARTITION BY app_id ORDER BY t ROWS UNBOUNDED PRECEDING) AS level
                   FROM points)
        SELECT {_day("t")} AS day, {_hour("t")} AS hour, app_id, max(level) AS peak
        FROM levels WHERE t >= {lo} AND t < {hi}
        GROUP BY ALL HAVING app_id IS NULL OR max(level) > 0""")


def clients(con: duckdb.DuckDBPyConnection, hourly: bool) -> duckdb.DuckDBPyRelation:
    """(day[, hour], app_id, implementation, version, binds, sides)."""
    us = "epoch_us(connect_time)"
    period = f"{_day(us)} AS day" + (f", {_hour(us)} AS hour" if hourly else "")
    return con.sql(f"""
        SELECT {period}, app_id, implementation, version, count(*) AS binds,
            count(DISTINCT side) AS sides
        FROM binds GROUP BY ALL""")


def connections(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    """(day, hour, samples, max_*) from the connection-count samples."""
    us = "epoch_us(sampled)"
    return con.sql(f"""
        SELECT {_day(us)} AS day, {_hour(us)} AS hour, count(*) AS samples,
            max(connections) AS max_connections, max(bound) AS max_bound,
            max(subscribed) AS max_subscribed, max(nameplates) AS max_nameplates,
            max(mailboxes) AS max_mailboxes
        FROM samples GROUP BY ALL""")


_MOODS = ("happy", "jilted", "lonely", "redundant", "errory", "impatient", "empty")


def transit(
    con: duckdb.DuckDBPyConnection, first: dt.date, last: dt.date
) -> duckdb.DuckDBPyRelation:
    """daily_transit for every day of [first, last]: records by the day they ended, pairs
    (happy or jilted) with exact percentiles, and the most pairs open at one instant
    (a running sum with a zero tick at every day start)."""
    lo = (first - _EPOCH).days * DAY_US
    hi = ((last - _EPOCH).days + 1) * DAY_US
    moods = ", ".join(f"count(*) FILTER (WHERE result = '{m}') AS {m}" for m in _MOODS)
    known = ", ".join(f"'{m}'" for m in _MOODS)
    return con.sql(f"""
        WITH pairs AS (SELECT * FROM relay WHERE result IN ('happy', 'jilted')),
        days AS (SELECT {_day("range")} AS day FROM range({lo}, {hi}, {DAY_US})),
        counts AS (
            SELECT {_day("e")} AS day, count(*) AS records,
                count(*) FILTER (WHERE result IN ('happy', 'jilted')) AS pairs,
                sum(total_bytes) AS bytes, {moods},
                count(*) FILTER (WHERE result NOT IN ({known})) AS other
            FROM relay GROUP BY ALL),
        times AS (
            SELECT {_day("e")} AS day,
                quantile_disc(waiting_time, [0.5, 0.9, 0.99]) AS waiting,
                quantile_disc(total_time, [0.5, 0.9, 0.99]) AS total
            FROM pairs GROUP BY ALL),
        ev AS (SELECT s AS t, 1 AS d FROM pairs WHERE e > s
               UNION ALL SELECT e AS t, -1 AS d FROM pairs WHERE e > s
               UNION ALL SELECT range AS t, 0 AS d FROM range({lo}, {hi}, {DAY_US})),
        points AS (SELECT t, sum(d) AS d FROM ev GROUP BY t),
        levels AS (SELECT t, sum(d) OVER (ORDER BY t ROWS UNBOUNDED PRECEDING) AS level
                   FROM points),
        peaks AS (SELECT {_day("t")} AS day, max(level) AS peak_pairs FROM levels
                  WHERE t >= {lo} AND t < {hi} GROUP BY ALL)
        SELECT days.day, coalesce(records, 0) AS records, coalesce(pairs, 0) AS pairs,
            coalesce(bytes, 0) AS bytes,
            {", ".join(f"coalesce({m}, 0) AS {m}" for m in _MOODS)},
            coalesce(other, 0) AS other, waiting, total, peak_pairs
        FROM days LEFT JOIN counts USING (day) LEFT JOIN times USING (day)
            LEFT JOIN peaks USING (day)
        ORDER BY days.day""")


def all_metrics(
    con: duckdb.DuckDBPyConnection, first: dt.date, last: dt.date
) -> dict[str, duckdb.DuckDBPyRelation]:
    """Every metric of the report, as relations (lazily evaluated)."""
    return {
        "daily_results": results(con, "mail", hourly=False),
        "hourly_results": results(con, "mail", hourly=True),
        "daily_nameplate_results": results(con, "plates", hourly=False),
        "hourly_nameplate_results": results(con, "plates", hourly=True),
        "daily_timing": timing(con, hourly=False),
        "hourly_timing": timing(con, hourly=True),
        "mailbox_peaks": peaks(con, "mail", first, last),
        "nameplate_peaks": peaks(con, "plates", first, last),
        "daily_clients": clients(con, hourly=False),
        "hourly_clients": clients(con, hourly=True),
        "hourly_connections": connections(con),
        "daily_transit": transit(con, first, last),
    }
