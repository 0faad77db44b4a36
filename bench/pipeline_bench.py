"""Benchmark (not a test): the Spark report beside DuckDB computing the same metrics.

For each size, demo data with that many mailboxes (and the nameplates, client versions and
connection samples that go with them) is generated once; then, each in a fresh process,

* Spark: `pigeonhole report --full` (local[*]), the whole job: JVM start, every table
  written as Parquet, anomalies, and the HTML page;
* DuckDB: the same metrics (tests/pipeline/duckdb_reference.py), each written as Parquet.

Usage: python bench/pipeline_bench.py [--sizes 1000000 10000000] [--days 90] [--runs 1]
Prints a Markdown table and each Spark run's step times (the report's progress lines, which
it writes to stderr, kept in WORKDIR/report-ROWS-RUN.log); the work directory is kept only
with --keep.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SPARK = """
import sys
from pigeonhole.cli.usage import report
report.main(sys.argv[1:], standalone_mode=False)
"""

_DUCKDB = """
import datetime as dt, sys
sys.path.insert(0, {tests!r})
from pipeline.duckdb_reference import all_metrics, connect
root, out, first, last = sys.argv[1:5]
con = connect(root)
con.execute("SET preserve_insertion_order = false")
for name, relation in all_metrics(con, dt.date.fromisoformat(first),
                                  dt.date.fromisoformat(last)).items():
    relation.write_parquet(f"{{out}}/{{name}}.parquet")
"""


def _timed(command: list[str], log: Path | None = None) -> float:
    """Wall time of `command`; its stderr goes to `log` (or is kept for the error)."""
    started = time.perf_counter()
    with open(log, "w") if log is not None else contextlib.nullcontext() as sink:
        subprocess.run(
            command,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=sink if sink is not None else subprocess.PIPE,
            env={**os.environ, "TZ": "UTC"},
        )
    return time.perf_counter() - started


def _steps(log: Path) -> list[str]:
    """The report's step lines (`[3/14] daily_summary (… to …) (12.3 s)`) from its stderr."""
    ended = re.compile(r"\[\d+/\d+\] .* \([\d.]+ s\)$")
    return [line for line in log.read_text().splitlines() if ended.match(line)]


def _generate(data: Path, rows: int, days: int, end: dt.date) -> float:
    from pigeonhole.pipeline import DemoConfig, generate

    started = time.perf_counter()
    generate(DemoConfig(out_dir=data, days=days, transfers=rows, end_day=end, seed=11))
    return time.perf_counter() - started


def _bench(work: Path, rows: int, days: int, runs: int, memory: str) -> dict[str, float]:
    end = dt.date(2026, 11, 22)
    data = work / f"data-{rows}"
    made = _generate(data, rows, days, end) if not data.exists() else 0.0
    first = end - dt.timedelta(days=days - 1)
    spark, duck = [], []
    for run in range(runs):
        out = work / f"report-{rows}-{run}"
        shutil.rmtree(out, ignore_errors=True)
        log = work / f"report-{rows}-{run}.log"
        spark.append(
            _timed(
                [
                    sys.executable,
                    "-c",
                    _SPARK,
                    "--input",
                    str(data),
                    "--output",
                    str(out),
                    "--full",
                    "--conf",
                    f"spark.driver.memory={memory}",
                ],
                log,
            )
        )
        print(f"  Spark steps, {rows:,} mailboxes, run {run + 1}:", *_steps(log), sep="\n    ")
        duck_out = work / f"duckdb-{rows}-{run}"
        shutil.rmtree(duck_out, ignore_errors=True)
        duck_out.mkdir()
        duck.append(
            _timed(
                [
                    sys.executable,
                    "-c",
                    _DUCKDB.format(tests=str(ROOT / "tests")),
                    str(data),
                    str(duck_out),
                    first.isoformat(),
                    (end + dt.timedelta(days=1)).isoformat(),
                ]
            )
        )
    return {"rows": rows, "generate": made, "spark": min(spark), "duckdb": min(duck)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=1, help="best of N runs")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, work dir {work}")
    print("| mailboxes | demo-data (s) | Spark report (s) | DuckDB (s) | Spark / DuckDB |")
    print("|---:|---:|---:|---:|---:|")
    results = []
    for rows in args.sizes:
        r = _bench(work, rows, args.days, args.runs, args.driver_memory)
        results.append(r)
        print(
            f"| {rows:,} | {r['generate']:.1f} | {r['spark']:.1f} | {r['duckdb']:.1f} | "
            f"{r['spark'] / r['duckdb']:.1f}× |",
            flush=True,
        )
    for a, b in itertools.pairwise(results):
        extra = (b["rows"] - a["rows"]) / 1e6
        growth = ", ".join(
            f"{engine} {(b[engine] - a[engine]) / extra:.1f} s" for engine in ("spark", "duckdb")
        )
        print(f"{a['rows']:,} -> {b['rows']:,}: per extra million mailboxes {growth}")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    if not args.keep and args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
