"""What an exchange costs a PostgreSQL shared by Pigeonhole nodes (docs/scaling.md).

Starts one or two `pigeonhole serve --store` nodes on a scratch database, runs the load
generator's exchanges (side B on the second node when there are two), then reads, per
completed exchange: the node batches (transactions that decide commands), the commands
they decided, the notifications received by every node, the database's commits
(`pg_stat_database`), the database's time inside the two batch functions
(`lock_and_load` and `apply_batch`, from `pg_stat_user_functions` with `track_functions`
on for the scratch database) and the WAL written (`pg_current_wal_lsn`; cluster-wide, so
run it on an otherwise quiet PostgreSQL). The database is dropped afterwards.

    .venv/bin/python bench/node_costs.py [--nodes 1 2] [--concurrency 1 100] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]

HERE = Path(__file__).resolve().parent
ADMIN = os.environ.get("PIGEONHOLE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_db(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    found = {}
    for line in text.splitlines():
        m = re.match(r"^(pigeonhole_node_\w+) (\S+)$", line)
        if m:
            found[m.group(1)] = float(m.group(2))
    return found


async def _fetchval(url: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


def run(nodes: int, concurrency: int, seconds: float, workdir: Path) -> dict[str, float]:
    name = f"pigeonhole_costs_{secrets.token_hex(4)}"
    asyncio.run(_fetchval(ADMIN, f'CREATE DATABASE "{name}"'))
    asyncio.run(_fetchval(ADMIN, f"ALTER DATABASE \"{name}\" SET track_functions = 'pl'"))
    url = _with_db(ADMIN, name)
    procs: list[tuple[subprocess.Popen[bytes], int, int]] = []
    try:
        for i in range(nodes):
            port, admin = _free_port(), _free_port()
            data = workdir / f"{name}-{i}"
            proc = subprocess.Popen(
                [sys.executable, "-m", "pigeonhole", "serve", "--host", "127.0.0.1",
                 "--port", str(port), "--admin-port", str(admin), "--data-dir", str(data),
                 "--store", url, "--max-connections-per-address", "60000",
                 "--max-nameplates-per-address", "60000", "--max-mailboxes-per-address",
                 "60000", "--max-stored-bytes-per-address", str(2**40)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append((proc, port, admin))
        for _, port, _ in procs:
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
        commits0 = asyncio.run(
            _fetchval(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", name)
        )
        wal0 = asyncio.run(_fetchval(url, "SELECT pg_current_wal_lsn()::text"))
        urls = [f"ws://127.0.0.1:{port}/v1" for _, port, _ in procs]
        out = workdir / f"{name}.json"
        subprocess.run(
            [sys.executable, str(HERE / "loadgen.py"), "exchanges", "--url", urls[0],
             "--url-b", urls[-1], "--concurrency", str(concurrency), "--warmup", "1",
             "--warmup-max", "2", "--measure", str(seconds), "--output", str(out)],
            check=True, timeout=seconds + 120,
        )  # fmt: skip
        time.sleep(1.5)  # the nodes' own ticks settle
        result = json.loads(out.read_text())
        done = result["completed_total"]
        figures: dict[str, float] = {}
        for _, _, admin in procs:
            for key, value in _metrics(admin).items():
                figures[key] = figures.get(key, 0.0) + value
        _stop(procs)  # a backend reports its statistics when it ends, if not before
        commits1 = asyncio.run(
            _fetchval(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", name)
        )
        wal = asyncio.run(
            _fetchval(url, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)", wal0)
        )
        functions_ms = asyncio.run(
            _fetchval(
                url,
                "SELECT coalesce(sum(total_time), 0) FROM pg_stat_user_functions"
                " WHERE funcname IN ('lock_and_load', 'apply_batch')",
            )
        )
        commands = figures["pigeonhole_node_commands_total"]
        return {
            "exchanges": done,
            "failed": result["failed"],
            "batches": figures["pigeonhole_node_batches_total"] / done,
            "commands": figures["pigeonhole_node_commands_total"] / done,
            "notifications received (all nodes)": figures["pigeonhole_node_notifications_total"]
            / done,
            "collisions": figures["pigeonhole_node_conflicts_total"] / done,
            "database commits": (commits1 - commits0) / done,
            "WAL bytes": float(wal) / done,
            "batch functions ms": float(functions_ms) / done,
            "batch functions µs per command": 1000 * float(functions_ms) / commands,
        }
    finally:
        _stop(procs)
        asyncio.run(_fetchval(ADMIN, f'DROP DATABASE "{name}" WITH (FORCE)'))


def _stop(procs: list[tuple[subprocess.Popen[bytes], int, int]]) -> None:
    for proc, _, _ in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc, _, _ in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pigeonhole-costs-") as tmp:
        for nodes in args.nodes:
            for concurrency in args.concurrency:
                figures = run(nodes, concurrency, args.seconds, Path(tmp))
                rows.append((nodes, concurrency, figures))
    keys = list(rows[0][2])
    print("| nodes | in flight | " + " | ".join(keys) + " |")
    print("|" + "---|" * (len(keys) + 2))
    for nodes, concurrency, figures in rows:
        cells = [
            f"{figures[k]:,.2f}" if k not in ("exchanges", "failed") else f"{figures[k]:,.0f}"
            for k in keys
        ]
        print(f"| {nodes} | {concurrency} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
