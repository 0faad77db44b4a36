"""Which of the database's statements cost more beside a crowd: two PostgreSQL servers side
by side, one alone and one beside waiting senders, their windows alternated.

    PIGEONHOLE_BENCH_POSTGRES=postgresql://postgres@127.0.0.1:5433/postgres \\
        .venv/bin/python bench/crowd_statements.py --pairs 3

Needs a cluster with `pg_stat_statements` loaded and tracking the statements inside the
batch functions too (`pg_stat_statements.track = all`; bench/pg_statements.py says how to
start one). As `crowd_paired.py` does, one server holds the crowd and one holds none, and
the windows at one number in flight alternate between them. Before each window the
cluster's statistics are reset; after it, each statement of that server's database is
read (calls, time, buffers hit, rows), with its backends' page faults and user and system
time from /proc. Printed: per exchange, alone and beside the crowd, each statement's time
and calls, its buffers hit and rows per call, summed over the windows. Statements are
matched by their text with constants and parameters taken out (the two databases' query
ids differ, and a statement can be kept with its constants in one and as parameters in
the other). A statement's time includes the statements it runs: `lock_and_load` holds
its query, which holds `short_names`. Times are wall-clock inside the backend, so a busy
machine stretches them; the /proc figures are CPU. Written to
bench/results/crowd_statements.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crowd  # bench/crowd.py: log, head_commit
import crowd_paired  # bench/crowd_paired.py: the two servers, their turns, the arguments
import pg_statements  # bench/pg_statements.py: the cluster's statement statistics
import run  # bench/run.py: run_level, the backends' PIDs and their /proc counts


def _shape(query: str) -> str:
    """The statement's text without its constants and parameters, shortened."""
    query = re.sub(r"\$\d+", "?", query)
    query = re.sub(r"'[^']*'", "?", query)
    return re.sub(r"\b\d+\b", "?", query)[:90]


def window(server: run.Server, level: int, args: argparse.Namespace) -> dict[str, Any]:
    database = server.postgres_db
    assert database is not None
    pg_statements.reset(run.POSTGRES_ADMIN)
    before = run.proc_counts(run._postgres_pids(database)[0])
    r = run.run_level(server, level, args)
    after = run.proc_counts(run._postgres_pids(database)[0])
    return {
        "completed": r.completed,
        "cpu_per_exchange_ms": r.cpu_per_exchange_ms,
        "database_cpu_per_exchange_ms": r.database_cpu_per_exchange_ms,
        "backends": {k: after[k] - before[k] for k in before},
        "statements": pg_statements.totals(run.POSTGRES_ADMIN, database),
    }


def table(windows: list[dict[str, Any]], top: int) -> list[str]:
    sums: dict[str, dict[str, list[float]]] = {"alone": {}, "crowd": {}}
    done = {"alone": 0, "crowd": 0}
    backends: dict[str, dict[str, int]] = {"alone": defaultdict(int), "crowd": defaultdict(int)}
    for w in windows:
        side = w["side"]
        done[side] += w["completed"]
        for k, v in w["backends"].items():
            backends[side][k] += v
        for s in w["statements"]:
            key = ("top " if s["toplevel"] else "in  ") + _shape(s["query"])
            cell = sums[side].setdefault(key, [0.0, 0.0, 0.0, 0.0])
            for i, field in enumerate(("calls", "ms", "hit", "rows")):
                cell[i] += s[field]
    na, nc = done["alone"] or 1, done["crowd"] or 1
    tick_us = 1e6 / run.CLK_TCK
    lines = [
        f"exchanges: {done['alone']:,} alone, {done['crowd']:,} beside the crowd",
        "",
        "| backends, per exchange | alone | beside the crowd |",
        "|---|---|---|",
    ]
    for k, scale, unit in (("user", tick_us, " µs"), ("system", tick_us, " µs"), ("faults", 1, "")):
        a, c = backends["alone"][k] * scale / na, backends["crowd"][k] * scale / nc
        lines.append(f"| {k} | {a:.1f}{unit} | {c:.1f}{unit} |")
    lines += [
        "",
        "| µs/exchange alone | beside | calls/exchange | hit/call | rows/call | statement |",
        "|---|---|---|---|---|---|",
    ]
    keys = set(sums["alone"]) | set(sums["crowd"])
    empty = [0.0, 0.0, 0.0, 0.0]

    def cost(key: str) -> float:
        return max(1000 * sums[s].get(key, empty)[1] / n for s, n in (("alone", na), ("crowd", nc)))

    for key in sorted(keys, key=cost, reverse=True)[:top]:
        a, c = sums["alone"].get(key, empty), sums["crowd"].get(key, empty)
        lines.append(
            f"| {1000 * a[1] / na:.1f} | {1000 * c[1] / nc:.1f} |"
            f" {a[0] / na:.3f} -> {c[0] / nc:.3f} |"
            f" {a[2] / max(a[0], 1):.0f} -> {c[2] / max(c[0], 1):.0f} |"
            f" {a[3] / max(a[0], 1):.1f} -> {c[3] / max(c[0], 1):.1f} | `{key}` |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--level", type=int, default=200, help="exchanges in flight")
    ap.add_argument("--pairs", type=int, default=3, help="windows on each server")
    ap.add_argument("--top", type=int, default=20, help="statements printed")
    args, python = crowd_paired.parse_pair_arguments(ap)
    if not pg_statements.available(run.POSTGRES_ADMIN):
        sys.exit(f"no pg_stat_statements at {run.POSTGRES_ADMIN}: see bench/pg_statements.py")
    windows: list[dict[str, Any]] = []
    with crowd_paired.paired_servers("pg", python, args) as (alone, crowded, held):
        for rep in range(args.pairs):
            for side, server in crowd_paired.sides(alone, crowded, rep):
                run.wait_for_quiet(args.quiet_wait)
                w = {"side": side, **window(server, args.level, args)}
                windows.append(w)
                crowd.log(
                    f"  {side:>5}: {w['completed']} exchanges,"
                    f" {w['cpu_per_exchange_ms'] or 0:.2f} ms CPU/exchange"
                    f" ({w['database_cpu_per_exchange_ms'] or 0:.2f} ms the database),"
                    f" backends' faults {w['backends']['faults'] / (w['completed'] or 1):.1f}"
                    "/exchange"
                )
    head = (
        f"Run {time.strftime('%Y-%m-%d %H:%M:%S')}, HEAD `{crowd.head_commit()}`,"
        f" src {args.src or 'this checkout'}; {args.pairs} windows of {args.measure:g} s on each"
        f" server at {args.level} in flight, alternated; a crowd of {held:,}."
    )
    md = "\n".join([head, "", *table(windows, args.top)])
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "crowd_statements.md").write_text(md + "\n")
    (out / "crowd_statements.json").write_text(json.dumps({"args": vars(args), "windows": windows}))


if __name__ == "__main__":
    main()
