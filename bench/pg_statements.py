"""What the database spends on each statement during a benchmark window (pg_stat_statements).

Needs a PostgreSQL cluster started with `shared_preload_libraries = 'pg_stat_statements'`
and the extension created in the admin database (`PIGEONHOLE_BENCH_POSTGRES`); the
machine's own cluster usually has neither, so a bench cluster of one's own is the way:

    su postgres -c '/usr/lib/postgresql/15/bin/initdb -D /var/tmp/pgstat/data -U postgres'
    # postgresql.conf: port = 5433, shared_preload_libraries = 'pg_stat_statements',
    #                  pg_stat_statements.track = all  (statements inside the functions too)
    PIGEONHOLE_BENCH_POSTGRES=postgresql://postgres@127.0.0.1:5433/postgres \
        .venv/bin/python bench/crowd.py --stores pg --statements 12

Counts are cluster-wide, filtered to the benchmark server's own database.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any


def _query(admin: str, sql: str) -> str:
    return subprocess.run(
        ["psql", admin, "-Atqc", sql], check=True, timeout=60, capture_output=True, text=True
    ).stdout


def available(admin: str) -> bool:
    try:
        return _query(admin, "select count(*) from pg_stat_statements limit 1").strip() != ""
    except subprocess.CalledProcessError:
        return False


def reset(admin: str) -> None:
    _query(admin, "select pg_stat_statements_reset()")


def top(admin: str, database: str, n: int) -> list[dict[str, Any]]:
    """The `n` statements of `database` that took the most execution time since the reset:
    calls, total and mean milliseconds, rows, shared blocks hit and read per call."""
    sql = f"""
        select coalesce(json_agg(t), '[]') from (
          select calls, round(total_exec_time::numeric, 1) as total_ms,
                 round(mean_exec_time::numeric, 4) as mean_ms, rows,
                 round(shared_blks_hit::numeric / greatest(calls, 1), 1) as hit_per_call,
                 round(shared_blks_read::numeric / greatest(calls, 1), 2) as read_per_call,
                 toplevel, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) as query
          from pg_stat_statements s join pg_database d on d.oid = s.dbid
          where d.datname = '{database}'
          order by total_exec_time desc limit {int(n)}) t
    """
    return json.loads(_query(admin, sql))  # type: ignore[no-any-return]


def totals(admin: str, database: str) -> list[dict[str, Any]]:
    """Every statement of `database` since the reset, its totals unrounded: calls, ms,
    shared blocks hit, rows, whether it was run at the top level, its text on one line."""
    sql = f"""
        select coalesce(json_agg(t), '[]') from (
          select calls, total_exec_time as ms, shared_blks_hit as hit, rows, toplevel,
                 regexp_replace(query, '\\s+', ' ', 'g') as query
          from pg_stat_statements s join pg_database d on d.oid = s.dbid
          where d.datname = '{database}') t
    """
    return json.loads(_query(admin, sql))  # type: ignore[no-any-return]


def lines(rows: list[dict[str, Any]]) -> list[str]:
    return [
        f"      {r['total_ms']:>9} ms {r['calls']:>7} calls {r['mean_ms']:>8} ms/call"
        f" {r['hit_per_call']:>7} hit/call {'top' if r['toplevel'] else 'in '} {r['query']}"
        for r in rows
    ]
