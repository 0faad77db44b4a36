"""Exchanges beside a crowd against none: two servers side by side, windows alternated.

    .venv/bin/python bench/crowd_paired.py                  # this checkout, both stores
    .venv/bin/python bench/crowd_paired.py --stores pg --src /tmp/a/src

`crowd.py` grows one server's crowd step by step, so its ratios compare windows minutes
apart; on a shared VM whose speed drifts (the same window can differ by a fifth from one
minute to the next) that drift lands in the ratio. Here two fresh servers of one store
run at once: one alone, one holding a crowd of waiting senders (`loadgen.py crowd`: bind,
allocate, claim, open, `pake`, wait), and at each number in flight the windows alternate
between them (A B, then B A, ...), so drift falls on both alike. Printed per number in
flight: server CPU per exchange beside the crowd over alone (each side's CPU summed over
its windows, divided by its exchanges; the median of the pairs' ratios and their range),
the node's and the database's parts, exchanges/s likewise; and on each server the largest
number in flight against the middle one; on PostgreSQL, where the database's part goes
(its backends' CPU and page faults, the cluster's own processes, WAL bytes) per exchange.
With --together the two windows of a pair run at the same time, each with its own
generator, so that whatever slows the machine meanwhile slows both (they then share its
two cores). Written to bench/results/crowd_paired.{md,json}. Only processes this script
started are signalled, by their PID.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crowd  # bench/crowd.py: the crowd generator, the stores, the python wrapper
import run  # bench/run.py: make_server, run_level, wait_for_quiet


def _sums(rows: list[dict[str, Any]]) -> dict[str, float]:
    done = sum(r["completed"] for r in rows) or 1
    gc = [r["gc_seconds"] for r in rows if r.get("gc_seconds") is not None]
    return {
        "gc_ms": 1000 * sum(gc) / done if len(gc) == len(rows) else -1.0,
        "cpu_ms": 1000 * sum(r["server_cpu"] for r in rows) / done,
        "db_ms": 1000 * sum(r.get("database_cpu", 0.0) for r in rows) / done,
        "rate": sum(r["completed"] for r in rows) / sum(r["measure"] for r in rows),
    }


@contextlib.contextmanager
def paired_servers(
    key: str, python: str | None, args: argparse.Namespace
) -> Iterator[tuple[run.Server, run.Server, int]]:
    """Two fresh servers of one store, (alone, beside the crowd, the crowd held): the
    crowd generator brings `args.crowd` waiting senders to the second; both servers and
    the generator are stopped at the end."""
    spec = crowd.STORES[key]
    alone = run.make_server(spec, Path(args.ref_venv), [], python)
    crowded = run.make_server(spec, Path(args.ref_venv), [], python)
    gen = None
    alone.start()
    try:
        crowded.start()
        try:
            time.sleep(1.0)
            gen = crowd.Crowd(crowded.url, [args.crowd], args)
            step = gen.next_step()
            crowd.log(f"  {key}: crowd of {step['held']} in {step['seconds']} s")
            yield alone, crowded, step["held"]
        finally:
            if gen is not None:
                gen.stop()
            crowded.stop()
    finally:
        alone.stop()


def sides(alone: run.Server, crowded: run.Server, turn: int) -> list[tuple[str, run.Server]]:
    """The pair's two sides in the order their windows run: A B, then B A, ..."""
    both = [("alone", alone), ("crowd", crowded)]
    return both[::-1] if turn % 2 else both


def one_store(
    key: str, python: str | None, args: argparse.Namespace, levels: list[int]
) -> dict[str, Any]:
    windows: list[dict[str, Any]] = []
    with paired_servers(key, python, args) as (alone, crowded, held):
        for rep in range(args.pairs):
            for i, level in enumerate(levels):
                pair = sides(alone, crowded, rep + i)
                run.wait_for_quiet(args.quiet_wait)
                if args.together:
                    results = _together(pair, level, args)
                else:
                    results = []
                    for n, (_, server) in enumerate(pair):
                        if n:
                            run.wait_for_quiet(args.quiet_wait)
                        results.append(run.run_level(server, level, args))
                for (side, server), r in zip(pair, results, strict=True):
                    windows.append({"side": side, "pair": rep, **r.__dict__})
                    crowd.log(
                        f"    {side:>5} x {level:>5}: {r.rate:7.1f}/s,"
                        f" {r.cpu_per_exchange_ms or 0:.2f} ms CPU/exchange"
                        f" ({r.database_cpu_per_exchange_ms or 0:.2f} ms the database,"
                        f" {r.gc_per_exchange_ms or 0:.3f} ms the collector),"
                        f" other {r.other_cores:.2f} cores, failed {r.failed}"
                    )
                    if not server.alive():
                        raise RuntimeError(f"{key} died: see {server.log_path}")
    return {"store": key, "held": held, "windows": windows}


def _together(
    sides: list[tuple[str, run.Server]], level: int, args: argparse.Namespace
) -> list[run.LevelResult]:
    """Both servers' windows at once (--together), each with its own load generator, so
    whatever slows the machine meanwhile slows both; the database's WAL is then both
    servers' and is left out."""
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = [pool.submit(run.run_level, server, level, args) for _, server in sides]
        results = [f.result() for f in futures]
    for r in results:
        r.database_counts = {}
    return results


def summary(result: dict[str, Any], levels: list[int]) -> list[str]:
    ws = result["windows"]
    lines = [
        f"{result['store']}: crowd of {result['held']:,} against none, {len(ws)} windows",
        "",
        "| in flight | CPU/exchange alone | beside the crowd | ratio (summed) | ratio (median"
        " of pairs, their range) | node part ratio | database part ratio | exchanges/s ratio |"
        " collector ms/exchange, alone -> beside |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for level in levels:
        a = [w for w in ws if w["side"] == "alone" and w["concurrency"] == level]
        c = [w for w in ws if w["side"] == "crowd" and w["concurrency"] == level]
        sa, sc = _sums(a), _sums(c)
        pairs = [
            cw["cpu_per_exchange_ms"] / aw["cpu_per_exchange_ms"]
            for aw, cw in zip(a, c, strict=True)
            if aw["cpu_per_exchange_ms"] and cw["cpu_per_exchange_ms"]
        ]
        node_a, node_c = sa["cpu_ms"] - sa["db_ms"], sc["cpu_ms"] - sc["db_ms"]
        db = f"{sc['db_ms'] / sa['db_ms']:.2f}x" if sa["db_ms"] else "-"
        gc = "-"
        if min(sa["gc_ms"], sc["gc_ms"]) >= 0:
            gc = f"{sa['gc_ms']:.3f} -> {sc['gc_ms']:.3f}"
        lines.append(
            f"| {level} | {sa['cpu_ms']:.2f} ms | {sc['cpu_ms']:.2f} ms |"
            f" {sc['cpu_ms'] / sa['cpu_ms']:.2f}x |"
            f" {statistics.median(pairs) if pairs else 0:.2f}x"
            f" ({min(pairs, default=0):.2f}-{max(pairs, default=0):.2f}) |"
            f" {node_c / node_a:.2f}x | {db} | {sc['rate'] / sa['rate']:.2f}x | {gc} |"
        )
    lines += _database_lines(ws, levels)
    top, mid = levels[-1], levels[len(levels) // 2]
    for side in ("alone", "crowd"):
        hi = _sums([w for w in ws if w["side"] == side and w["concurrency"] == top])
        mi = _sums([w for w in ws if w["side"] == side and w["concurrency"] == mid])
        lines.append(
            f"- {side}: CPU per exchange at {top} in flight against {mid}:"
            f" {hi['cpu_ms'] / mi['cpu_ms']:.2f}x"
        )
    return lines


def _database_lines(ws: list[dict[str, Any]], levels: list[int]) -> list[str]:
    """Where the database's part goes, per exchange, alone -> beside the crowd: its
    backends' CPU and page faults, the cluster's own processes' CPU, WAL written
    (PostgreSQL only)."""
    if not any(w.get("database_counts") for w in ws):
        return []
    lines = [
        "",
        "| in flight | database backends ms/exchange | their page faults/exchange |"
        " cluster processes ms/exchange | WAL bytes/exchange |",
        "|---|---|---|---|---|",
    ]

    def per(rows: list[dict[str, Any]], f: Any) -> float:
        return sum(f(r) for r in rows) / (sum(r["completed"] for r in rows) or 1)

    for level in levels:
        sides = [
            [w for w in ws if w["side"] == side and w["concurrency"] == level]
            for side in ("alone", "crowd")
        ]
        cells = []
        for key, scale, fmt in (
            ("backends", 1000, ".3f"),
            ("backend_faults", 1, ".1f"),
            ("cluster", 1000, ".3f"),
            ("wal_bytes", 1, ".0f"),
        ):

            def value(r: dict[str, Any], key: str = key) -> float:
                if key == "backends":
                    return float(r["database_cpu"] - r.get("database_cluster_cpu", 0.0))
                if key == "cluster":
                    return float(r.get("database_cluster_cpu", 0.0))
                return float(r.get("database_counts", {}).get(key, 0.0))

            a, c = (scale * per(rows, value) for rows in sides)
            cells.append(f"{a:{fmt}} -> {c:{fmt}}")
        lines.append(f"| {level} | " + " | ".join(cells) + " |")
    return lines


def parse_pair_arguments(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, str | None]:
    """Add the arguments every paired run takes (the `src` run, the crowd, the windows,
    where results go), parse, and return them with the Python that runs `--src` (None:
    this checkout)."""
    ap.add_argument("--src", help="a Pigeonhole `src` directory to run (default: this checkout)")
    ap.add_argument("--crowd", type=int, default=15_000, help="waiting senders")
    crowd.add_window_and_crowd_arguments(ap, measure=10.0)
    ap.add_argument("--ref-venv", default=str(run.REPO / ".venv"))
    ap.add_argument("--out", default=str(run.BENCH / "results"))
    args = ap.parse_args()
    args.status_poll = 0.0  # what run.run_level reads
    args.procs, args.procs_from = 1, 10**9
    python = None
    if args.src:
        python = crowd.wrapper(Path(args.src).resolve(), Path(tempfile.mkdtemp(prefix="bench-")))
    return args, python


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", default="sqlite,pg")
    ap.add_argument("--levels", default="200,400,1200", help="exchanges in flight")
    ap.add_argument("--pairs", type=int, default=3, help="windows on each server per level")
    ap.add_argument(
        "--together",
        action="store_true",
        help="run each pair's two windows at the same time instead of one after the other",
    )
    args, python = parse_pair_arguments(ap)
    levels = [int(x) for x in args.levels.split(",")]
    started = time.time()
    results = []
    for key in args.stores.split(","):
        crowd.log(f"{key}: two servers, one alone and one beside the crowd")
        results.append(one_store(key, python, args, levels))
    head = (
        f"Run {time.strftime('%Y-%m-%d %H:%M:%S')}, HEAD `{crowd.head_commit()}`,"
        f" src {args.src or 'this checkout'}, {time.time() - started:.0f} s;"
        f" {args.pairs} windows of {args.measure:g} s on each server per number in flight,"
        " alternated."
    )
    md = "\n".join([head, ""] + [ln for res in results for ln in [*summary(res, levels), ""]])
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "crowd_paired.md").write_text(md + "\n")
    (out / "crowd_paired.json").write_text(
        json.dumps({"args": vars(args), "results": results}, indent=1)
    )


if __name__ == "__main__":
    main()
