"""What an exchange costs beside a crowd of waiting senders, on both stores.

    .venv/bin/python bench/crowd.py                      # this checkout, SQLite and PostgreSQL
    .venv/bin/python bench/crowd.py --variant before=/tmp/a/src --variant after=/tmp/b/src

A mailbox server's normal state is a crowd: people who typed `wormhole send` and wait for
their peer, each holding a connection, a nameplate and a mailbox. For each store and each
variant (a `src` directory run by this venv's Python, or this checkout), one fresh server
(bench/run.py starts it as `bench/run` does), then for each crowd size, growing: the crowd
generator (`loadgen.py crowd`, a process of its own: bind, allocate, claim, open, add
`pake`, then wait) brings the crowd to that size; the server's memory (PSS) and its CPU
while the crowd only waits are read; then exchanges run at each number in flight
(`run.run_level`: warm-up, one window, server CPU from /proc/PID/stat over it). The
ratios printed are within one server's run: CPU per exchange beside the crowd against no
crowd at the same number in flight, the largest number in flight against the middle one,
exchanges/s beside the crowd against alone. Variants alternate round to round (A B, then
B A). With --reference, the reference server (its databases on tmpfs, which only makes the
crowd quicker to build) holds the crowd too, for memory per waiting client.

Written to bench/results/crowd.{md,json}. Only processes this script started are
signalled, by their PID.
"""

from __future__ import annotations

import argparse
import json
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pg_statements  # bench/pg_statements.py: the database's time per statement
import run  # bench/run.py: Server, make_server, run_level, memory and CPU readings

STORES = {
    "sqlite": run.ServerSpec("pigeonhole", "Pigeonhole (SQLite)", "pigeonhole", "disk"),
    "pg": run.ServerSpec("pigeonhole-pg", "Pigeonhole (PostgreSQL)", "pigeonhole", "postgresql"),
}
REFERENCE = run.ServerSpec("reference-tmpfs", "reference 0.8.0 (tmpfs)", "reference", "tmpfs")


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def wrapper(src: Path, where: Path) -> str:
    """A python that imports Pigeonhole from `src` (this venv's Python, PYTHONPATH first)."""
    path = where / f"python-{abs(hash(str(src))):x}"
    path.write_text(
        f'#!/bin/sh\nPYTHONPATH={src}${{PYTHONPATH:+:$PYTHONPATH}} exec {run.main_python()} "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def rss_kib(server: run.Server) -> int:
    total = 0
    for pid in server.all_pids():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


class Crowd:
    """The crowd generator, a process of its own, grown step by step."""

    def __init__(self, url: str, steps: list[int], args: argparse.Namespace) -> None:
        argv = [
            run.main_python(), str(run.BENCH / "loadgen.py"), "crowd", "--url", url,
            "--steps", ",".join(str(s) for s in steps), "--parallel", str(args.crowd_parallel),
            "--time-limit", str(args.crowd_time_limit), "--sources", args.crowd_sources,
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def next_step(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the crowd generator ended early")
        return json.loads(line)  # type: ignore[no-any-return]

    def go_on(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def waiting_cpu(server: run.Server, seconds: float) -> float:
    """Cores the server uses while the crowd only waits."""
    c0 = server.cpu_seconds()
    time.sleep(seconds)
    return (server.cpu_seconds() - c0) / seconds


def one_server(
    spec: run.ServerSpec, python: str | None, args: argparse.Namespace, levels: list[int]
) -> dict[str, Any]:
    crowds = [int(c) for c in args.crowds.split(",")]
    server = run.make_server(spec, Path(args.ref_venv), [], python)
    rows: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    server.start()
    crowd = None
    try:
        time.sleep(1.0)
        base = {"crowd": 0, "held": 0, "pss_kib": server.memory_kib(), "rss_kib": rss_kib(server)}
        memory.append(base)
        steps = [c for c in crowds if c > 0]
        if steps:
            crowd = Crowd(server.url, steps, args)
        for size in crowds:
            held = 0
            if size > 0:
                assert crowd is not None
                step = crowd.next_step()
                held = step["held"]
                mem = {
                    "crowd": size,
                    "held": held,
                    "pss_kib": server.memory_kib(),
                    "rss_kib": rss_kib(server),
                    "build_seconds": step["seconds"],
                    "failures": step["failures"],
                    "waiting_cores": waiting_cpu(server, args.idle_seconds),
                }
                memory.append(mem)
                log(
                    f"    crowd {size}: held {held} in {step['seconds']} s, "
                    f"PSS {mem['pss_kib'] / 1024:.1f} MiB, waiting {mem['waiting_cores']:.3f} cores"
                    f", failures {step['failures']}"
                )
            for level in levels:
                run.wait_for_quiet(args.quiet_wait)
                database = server.postgres_db if args.statements else None
                if database is not None:
                    pg_statements.reset(run.POSTGRES_ADMIN)
                r = run.run_level(server, level, args)
                row = {"crowd": size, "held": held, **r.__dict__}
                if database is not None:
                    row["statements"] = pg_statements.top(
                        run.POSTGRES_ADMIN, database, args.statements
                    )
                rows.append(row)
                log(
                    f"    crowd {size:>6} x {level:>5} in flight: {r.rate:7.1f}/s, "
                    f"{r.cpu_per_exchange_ms or 0:.2f} ms CPU/exchange"
                    f" ({r.database_cpu_per_exchange_ms or 0:.2f} ms of it the database), "
                    f"other {r.other_cores:.2f} cores, failed {r.failed}"
                )
                for line in pg_statements.lines(row.get("statements", [])):
                    log(line)
                if not server.alive():
                    raise RuntimeError(f"{spec.key} died: see {server.log_path}")
            if crowd is not None and size > 0:
                crowd.go_on()
    finally:
        if crowd is not None:
            crowd.stop()
        server.stop()
    return {"rows": rows, "memory": memory}


def reference_memory(args: argparse.Namespace) -> dict[str, Any]:
    """The reference server holding the crowd: its memory at each size (no exchanges)."""
    steps = [int(c) for c in args.reference_crowds.split(",")]
    server = run.make_server(REFERENCE, Path(args.ref_venv), [], None)
    server.start()
    memory = []
    crowd = None
    try:
        time.sleep(1.0)
        memory.append(
            {"crowd": 0, "held": 0, "pss_kib": server.memory_kib(), "rss_kib": rss_kib(server)}
        )
        crowd = Crowd(server.url, steps, args)
        for size in steps:
            step = crowd.next_step()
            mem = {
                "crowd": size,
                "held": step["held"],
                "pss_kib": server.memory_kib(),
                "rss_kib": rss_kib(server),
                "build_seconds": step["seconds"],
                "failures": step["failures"],
            }
            memory.append(mem)
            log(
                f"    reference crowd {size}: held {step['held']},"
                f" PSS {mem['pss_kib'] / 1024:.1f} MiB"
            )
            crowd.go_on()
    finally:
        if crowd is not None:
            crowd.stop()
        server.stop()
    return {"memory": memory}


def per_client(memory: list[dict[str, Any]]) -> list[str]:
    base = memory[0]["pss_kib"]
    out = []
    for m in memory[1:]:
        if m["held"]:
            out.append(
                f"{m['held']:,}: {m['pss_kib'] / 1024:.0f} MiB PSS, "
                f"{(m['pss_kib'] - base) / m['held']:.1f} KiB per waiting client"
            )
    return out


def table(results: list[dict[str, Any]], levels: list[int]) -> str:
    lines = [
        "| run | store | variant | crowd | in flight | exchanges/s | server CPU per exchange"
        " | of it the database | CPU ratio to no crowd | exchanges/s ratio to no crowd"
        " | other cores | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        rows = res["rows"]
        alone = {r["concurrency"]: r for r in rows if r["crowd"] == 0}
        for r in rows:
            a = alone.get(r["concurrency"])
            cpu = r["cpu_per_exchange_ms"]
            ratio = rate_ratio = "-"
            if a and a["cpu_per_exchange_ms"] and cpu and r["crowd"]:
                ratio = f"{cpu / a['cpu_per_exchange_ms']:.2f}x"
            if a and a["rate"] and r["crowd"]:
                rate_ratio = f"{r['rate'] / a['rate']:.2f}x"
            lines.append(
                f"| {res['round']} | {res['store']} | {res['variant']} | {r['crowd']:,} |"
                f" {r['concurrency']} | {r['rate']:.0f} | {cpu or 0:.2f} ms |"
                f" {r.get('database_cpu_per_exchange_ms') or 0:.2f} ms | {ratio} |"
                f" {rate_ratio} | {r['other_cores']:.2f} | {r['failed']} |"
            )
    lines.append("")
    if not levels:
        levels = [0]
    top, mid = levels[-1], levels[len(levels) // 2]
    lines.append(f"In-flight ratios (CPU per exchange at {top} against {mid} in flight):")
    lines.append("")
    for res in results:
        rows = res["rows"]
        parts = []
        for size in sorted({r["crowd"] for r in rows}):
            by = {r["concurrency"]: r for r in rows if r["crowd"] == size}
            hi, middle = by.get(top), by.get(mid)
            if hi and middle and hi["cpu_per_exchange_ms"] and middle["cpu_per_exchange_ms"]:
                ratio = hi["cpu_per_exchange_ms"] / middle["cpu_per_exchange_ms"]
                parts.append(f"crowd {size:,}: {ratio:.2f}x")
        lines.append(
            f"- round {res['round']}, {res['store']}, {res['variant']}: " + ", ".join(parts)
        )
        for m in per_client(res["memory"]):
            lines.append(f"  - memory at {m}")
    return "\n".join(lines)


def add_window_and_crowd_arguments(ap: argparse.ArgumentParser, measure: float) -> None:
    """The windows' knobs (what run.run_level reads) and the crowd generator's."""
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--warmup-max", type=float, default=20.0)
    ap.add_argument("--measure", type=float, default=measure)
    ap.add_argument("--drain", type=float, default=20.0)
    ap.add_argument("--ramp", type=float, default=1.0)
    ap.add_argument("--messages", type=int, default=1)
    ap.add_argument("--client", default="raw")
    ap.add_argument("--quiet-wait", type=float, default=3.0, help="most seconds to wait for quiet")
    ap.add_argument("--crowd-parallel", type=int, default=64)
    ap.add_argument("--crowd-time-limit", type=float, default=400.0)
    ap.add_argument(
        "--crowd-sources",
        choices=["many", "one"],
        default="many",
        help="many: each waiting sender from a loopback address of its own (127.1.x.y), as a "
        "crowd of people is; one: all from 127.0.0.1, as behind one NAT (the per-address "
        "quotas are lifted either way)",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", default="sqlite,pg")
    ap.add_argument(
        "--variant", action="append", default=[], metavar="NAME=SRC",
        help="a Pigeonhole `src` directory to run (repeat to compare; default: this checkout)",
    )  # fmt: skip
    ap.add_argument("--crowds", default="0,2000,8000,15000", help="crowd sizes, growing")
    ap.add_argument("--levels", default="200,400,1200", help="exchanges in flight")
    ap.add_argument("--rounds", type=int, default=1, help="variants alternate round to round")
    add_window_and_crowd_arguments(ap, measure=5.0)
    ap.add_argument(
        "--idle-seconds", type=float, default=3.0, help="CPU read while the crowd waits"
    )
    ap.add_argument("--reference", action="store_true", help="the reference's memory too")
    ap.add_argument("--reference-crowds", default="2000,8000")
    ap.add_argument("--ref-venv", default=str(run.REPO / ".venv"))
    ap.add_argument(
        "--statements", type=int, default=0, metavar="N",
        help="PostgreSQL: the N statements that took the database most time in each level"
        " (needs pg_stat_statements: see bench/pg_statements.py)",
    )  # fmt: skip
    ap.add_argument("--out", default=str(run.BENCH / "results"))
    args = ap.parse_args()
    if args.statements and not pg_statements.available(run.POSTGRES_ADMIN):
        ap.error(f"--statements: no pg_stat_statements at {run.POSTGRES_ADMIN}")
    # what run.run_level reads
    args.status_poll = 0.0
    args.procs, args.procs_from = 1, 10**9
    levels = [int(x) for x in args.levels.split(",") if x]  # none: memory only
    where = Path(tempfile.mkdtemp(prefix="bench-crowd-"))
    variants: list[tuple[str, str | None]] = []
    for v in args.variant:
        name, _, src = v.partition("=")
        variants.append((name, wrapper(Path(src).resolve(), where)))
    if not variants:
        variants = [("checkout", None)]
    started = time.time()
    results: list[dict[str, Any]] = []
    reference = None
    if args.reference:
        log("reference (tmpfs): memory with the crowd")
        reference = reference_memory(args)
    for rnd in range(1, args.rounds + 1):
        order = variants if rnd % 2 else variants[::-1]
        for store in args.stores.split(","):
            for name, python in order:
                log(f"round {rnd}, {store}, {name}")
                res = one_server(STORES[store], python, args, levels)
                results.append({"round": rnd, "store": store, "variant": name, **res})
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    head = (
        f"Run {when}, HEAD `{head_commit()}`, {time.time() - started:.0f} s; crowds {args.crowds},"
        f" in flight {args.levels}, {args.measure:g} s windows, the crowd from"
        f" {'a loopback address each' if args.crowd_sources == 'many' else '127.0.0.1'};"
        " a shared 2-core machine"
        " (other developers' browsers and tests: see `other cores`)."
    )
    md = head + "\n\n" + table(results, levels)
    if reference is not None:
        md += "\n\nReference 0.8.0 (databases on tmpfs), memory with the crowd:\n\n"
        md += "\n".join(f"- at {m}" for m in per_client(reference["memory"]))
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "crowd.md").write_text(md + "\n")
    (out / "crowd.json").write_text(
        json.dumps({"args": vars(args), "results": results, "reference": reference}, indent=1)
    )


def head_commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(run.REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
