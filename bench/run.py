"""Pigeonhole against the reference mailbox server, side by side, in one command.

    .venv/bin/python bench/run.py            # the full run, a few minutes
    .venv/bin/python bench/run.py --quick    # shorter windows, for a smoke test

What it does (see bench/README.md):
  1. makes (once) a separate venv with the reference server from PyPI
     (magic-wormhole-mailbox-server), one with picows for its trivial server (picows
     is a candidate, not a dependency), and uses this repository's venv for the rest;
  2. for each server - Pigeonhole (disk), the reference (disk), a trivial in-memory
     server (the ceiling of the generator), the reference with its databases on tmpfs
     (CPU per exchange without fsync), the same trivial server on websockets and on
     picows (from its own side venv, made once), and on request Pigeonhole on PostgreSQL
     (`pigeonhole-pg`: one node; `pigeonhole-pg2`: two nodes on one database, side B of
     every exchange on the second) - starts it alone on 127.0.0.1 on a
     free port with a fresh data directory, drives it with bench/loadgen.py at each level,
     reads its CPU time (/proc/PID/stat) over each measuring window, then restarts it
     fresh to hold idle connections and read its memory (/proc/PID/smaps_rollup);
  3. prints one table with every server and the ratios, checks the issue's targets,
     and writes bench/results/latest.{md,json}.

Only processes this script started are ever signalled, by their PID.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CACHE = Path(os.environ.get("PIGEONHOLE_BENCH_CACHE", Path.home() / ".cache" / "pigeonhole-bench"))
REF_SPEC = "magic-wormhole-mailbox-server==0.8.0"
TOOLS_SPEC = ["py-spy", "pyinstrument"]
#: the picows trivial server's side venv: picows is a candidate, not a dependency
PICOWS_SPEC = ["picows==2.3.1", "orjson", "uvloop"]
PICOWS_VENV = CACHE / "picows-venv"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SERVER_NOFILE = 65536


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def main_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


# --- environments -------------------------------------------------------------------


def ensure_venv(path: Path, specs: list[str], probe: str, imports: str = "") -> Path:
    """A venv at `path` with `specs` installed; made once, reused after.

    It is there when `bin/<probe>` exists and, if given, `import <imports>` works in it
    (for packages that install no script).
    """
    ready = (path / "bin" / probe).exists()
    if ready and imports:
        check = [str(path / "bin" / "python"), "-c", f"import {imports}"]
        ready = subprocess.run(check, capture_output=True, timeout=60).returncode == 0
    if ready:
        return path
    log(f"setting up {path} with {' '.join(specs)} (once)")
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(path)], check=True, timeout=300)
    subprocess.run(
        [str(path / "bin" / "python"), "-m", "pip", "install", "-q", *specs],
        check=True,
        timeout=900,
    )
    return path


def fs_type(path: Path) -> str:
    """The filesystem type holding `path` (longest mount point prefix)."""
    best, kind = "", "?"
    real = str(path.resolve())
    with open("/proc/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            mnt = parts[1]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, kind = mnt, parts[2]
    return kind


def disk_tmpdir(prefix: str) -> Path:
    for base in ("/var/tmp", tempfile.gettempdir(), str(REPO)):
        if os.path.isdir(base) and fs_type(Path(base)) not in ("tmpfs", "ramfs"):
            return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    raise SystemExit("no disk-backed temporary directory found")


def shm_tmpdir(prefix: str) -> Path:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- servers --------------------------------------------------------------------------


def _raise_nofile() -> None:  # runs in the child before exec
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_NOFILE, SERVER_NOFILE))
    except (ValueError, OSError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


@dataclass
class ServerSpec:
    key: str
    label: str
    kind: str  # pigeonhole | reference | trivial
    storage: str  # disk | tmpfs | memory | postgresql
    #: serve processes on one database (postgresql only): side B of every exchange is on
    #: the second, so every exchange crosses nodes
    nodes: int = 1


@dataclass
class Server:
    spec: ServerSpec
    argv: list[str]
    data_dir: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    #: Pigeonhole's admin listener (/status, /status.json), when this version has one
    admin_port: int | None = None
    #: the PostgreSQL database made for this server (`--store`), dropped when it stops
    postgres_db: str | None = None
    #: further nodes on the same database (pigeonhole-pg2), started after this one (the
    #: first creates the schema) and stopped before it; their CPU and memory count here
    peers: list[Server] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1"

    @property
    def url_b(self) -> str | None:
        """Where side B of each exchange connects, when not to `url`: the second node."""
        return self.peers[0].url if self.peers else None

    def start(self, timeout: float = 60.0) -> None:
        self._start(timeout)
        try:
            for peer in self.peers:
                peer.start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        self.log_path = self.data_dir / "server.log"
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.data_dir,
                preexec_fn=_raise_nofile,
                start_new_session=True,
            )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.spec.key} exited at start: see {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    time.sleep(0.3)
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.spec.key} did not listen within {timeout}s")

    def pids(self) -> list[int]:
        """The server process and its descendants (servers may fork workers)."""
        if self.proc is None:
            return []
        kids = _children()
        todo, seen = [self.proc.pid], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo.extend(kids.get(pid, []))
        return seen

    def all_pids(self) -> list[int]:
        """pids() of this node and of every further node."""
        return [pid for node in (self, *self.peers) for pid in node.pids()]

    def cpu_seconds(self) -> float:
        """The server's CPU time, every node's; with a PostgreSQL store, the cluster's added:
        its own processes and the backends of this server's database (they run on this
        machine and do the store's work; other databases' backends are left out)."""
        nodes, backends, cluster = self.cpu_split()
        return nodes + backends + cluster

    def cpu_split(self) -> tuple[float, float, float]:
        """cpu_seconds() in three: the server's own processes, the backends of its
        PostgreSQL database, and the cluster's own processes (WAL writer, checkpointer,
        ...); 0 for the last two without one."""
        if not self.postgres_db:
            return _cpu_seconds(self.all_pids()), 0.0, 0.0
        backends, cluster = _postgres_pids(self.postgres_db)
        return _cpu_seconds(self.all_pids()), _cpu_seconds(backends), _cpu_seconds(cluster)

    def database_counters(self) -> dict[str, float]:
        """The cluster's WAL written so far, in bytes (its insert position: exact at any
        moment, where `pg_stat_wal` and `pg_stat_database` lag while backends stay busy),
        and the page faults of the database's backends (minor ones, from /proc: memory
        first touched, or given back and touched again); {} without PostgreSQL. A window's
        difference is its own: only the measured server works meanwhile."""
        if not self.postgres_db:
            return {}
        faults = float(proc_counts(_postgres_pids(self.postgres_db)[0])["faults"])
        sql = "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')"
        try:
            out = subprocess.run(
                ["psql", POSTGRES_ADMIN, "-Atc", sql], capture_output=True, text=True, timeout=30
            ).stdout.strip()
            return {"wal_bytes": float(out), "backend_faults": faults}
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return {}

    def gc_seconds(self) -> float | None:
        """Seconds the server's garbage collector has run (`pigeonhole_gc_seconds_total`,
        every generation, from the admin listener's /metrics); None where there is none."""
        if self.admin_port is None:
            return None
        url = f"http://127.0.0.1:{self.admin_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            return None
        values = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("pigeonhole_gc_seconds_total{")
        ]
        return sum(values) if values else None

    def memory_kib(self) -> float:
        """Proportional set size of the server's processes (RSS for one process)."""
        total = 0.0
        for pid in self.all_pids():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            total += int(line.split()[1])
                            break
            except OSError:
                try:
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("VmRSS:"):
                                total += int(line.split()[1])
                except OSError:
                    pass
        return total

    def alive(self) -> bool:
        return all(n.proc is not None and n.proc.poll() is None for n in (self, *self.peers))

    def stop(self) -> None:
        for peer in self.peers:
            peer.stop()
        if self.proc is None:
            return
        pids = self.pids()
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            for pid in self.pids():
                _signal(pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for pid in pids[1:]:  # descendants that outlived the parent
            _signal(pid, signal.SIGKILL)
        self.proc = None
        if self.postgres_db is not None:
            _psql(f'DROP DATABASE IF EXISTS "{self.postgres_db}" WITH (FORCE)')
            self.postgres_db = None


#: the PostgreSQL server the `pigeonhole-pg` runs use (a superuser's URL)
POSTGRES_ADMIN = os.environ.get(
    "PIGEONHOLE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _psql(sql: str) -> None:
    subprocess.run(["psql", POSTGRES_ADMIN, "-qc", sql], check=True, timeout=60)


def _postgres_pids(database: str) -> tuple[list[int], list[int]]:
    """The local PostgreSQL cluster's processes (named `postgres`) that work for `database`:
    the backends connected to `database` (not those of other databases: tests may use the
    cluster meanwhile), and the postmaster with its auxiliary processes (WAL writer,
    checkpointer, ...)."""
    backends: list[int] = []
    cluster: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() != "postgres":
                        continue
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    title = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            owner = _backend_database(title)
            if owner is None:
                cluster.append(int(entry))
            elif owner == database:
                backends.append(int(entry))
    return backends, cluster


def _backend_database(title: str) -> str | None:
    """The database of a backend from its process title, `postgres: [cluster: ]USER DB
    HOST(PORT) STATE`; None for the postmaster and the auxiliary processes."""
    words = title.split()
    for i, w in enumerate(words[1:], 1):
        if w == "[local]" or ("(" in w and w.endswith(")")):
            return words[i - 1]
    return None


def proc_counts(pids: list[int]) -> dict[str, int]:
    """Minor page faults and user and system clock ticks of these processes, summed
    (/proc/PID/stat; a process gone meanwhile counts nothing)."""
    total = {"faults": 0, "user": 0, "system": 0}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total["faults"] += int(fields[7])  # minflt
        total["user"] += int(fields[11])  # utime
        total["system"] += int(fields[12])  # stime
    return total


def _cpu_seconds(pids: list[int]) -> float:
    counts = proc_counts(pids)
    return (counts["user"] + counts["system"]) / CLK_TCK


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


#: quotas per client address (since 7c78180) lifted like the connection caps: at 100 in
#: flight one address holds ~100 nameplates and mailboxes, above the defaults (32 / 64)
ADDRESS_QUOTAS = {
    "--max-nameplates-per-address": "60000",
    "--max-mailboxes-per-address": "60000",
    "--max-stored-bytes-per-address": str(1 << 40),
}


@functools.cache
def serve_help(python: str) -> str:
    """This Pigeonhole's `serve --help`: which options it knows (older commits lack some)."""
    return subprocess.run(
        [python, "-m", "pigeonhole", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    ).stdout


def address_quota_args(python: str) -> tuple[str, ...]:
    """The ADDRESS_QUOTAS options this Pigeonhole knows (older commits have none)."""
    out = serve_help(python)
    return tuple(x for opt, value in ADDRESS_QUOTAS.items() if opt in out for x in (opt, value))


def has_admin_listener(python: str) -> bool:
    """Whether this Pigeonhole's `serve` has --admin-port (older commits have none)."""
    return "--admin-port" in serve_help(python)


class StatusPoller:
    """The status page left open: /status once, then /status.json every `interval` s."""

    def __init__(self, port: int, interval: float) -> None:
        self._base = f"http://127.0.0.1:{port}"
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.polls = 0
        self.errors = 0

    def _get(self, path: str) -> None:
        try:
            with urllib.request.urlopen(self._base + path, timeout=5) as answer:
                answer.read()
            self.polls += 1
        except OSError:
            self.errors += 1

    def _run(self) -> None:
        self._get("/status")
        while not self._stop.wait(self._interval):
            self._get("/status.json")

    def __enter__(self) -> StatusPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def own_relay_port(python: str, extra: list[str]) -> bool:
    """Whether `serve` gets `--transit-port 0`: it has a relay, and `extra` neither
    places it nor turns it off."""
    placed = "--transit-port" in extra or "--no-transit" in extra
    return not placed and "--transit-port" in serve_help(python)


def make_server(
    spec: ServerSpec,
    ref_venv: Path,
    extra: list[str],
    pigeonhole_python: str | None = None,
    lift_quotas: bool = True,
) -> Server:
    if spec.storage == "tmpfs":
        data = shm_tmpdir(f"bench-{spec.key}-")
    else:
        data = disk_tmpdir(f"bench-{spec.key}-")
    port = free_port()
    py = main_python()
    if spec.kind == "pigeonhole":
        python = os.path.abspath(pigeonhole_python) if pigeonhole_python else py

        def serve(port: int, data: Path) -> list[str]:
            return [
                python, "-m", "pigeonhole", "serve",
                "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data / "db"),
                # every client is 127.0.0.1 here: lift the per-address and total caps so
                # the benchmark measures capacity, not the abuse policy
                "--max-connections", "60000", "--max-connections-per-address", "60000",
                *(address_quota_args(python) if lift_quotas else ()), *extra,
                # the relay on a free port (its default, 4001, may be taken), unless the
                # caller placed it (its CLIs need the port) or turned it off
                *(["--transit-port", "0"] if own_relay_port(python, extra) else []),
            ]  # fmt: skip

        argv = serve(port, data)
        database = None
        if spec.storage == "postgresql":  # a fresh database on the local server
            database = f"pigeonhole_bench_{os.getpid()}_{port}"
            _psql(f'CREATE DATABASE "{database}"')
            argv += ["--store", POSTGRES_ADMIN.rsplit("/", 1)[0] + "/" + database]
        if spec.nodes > 1:  # nodes of one server: own port, data dir, admin on any free port
            assert database is not None, "several nodes need a PostgreSQL store"
            store = argv[-2:]
            argv += ["--admin-port", "0"]
            peers = []
            for _ in range(spec.nodes - 1):
                peer_data = disk_tmpdir(f"bench-{spec.key}-")
                peer_port = free_port()
                peer_argv = [*serve(peer_port, peer_data), *store, "--admin-port", "0"]
                peers.append(Server(spec, peer_argv, peer_data, peer_port))
            return Server(spec, argv, data, port, postgres_db=database, peers=peers)
        if has_admin_listener(python):  # a free admin port: its default may be taken
            admin_port = free_port()
            argv += ["--admin-port", str(admin_port)]
            return Server(spec, argv, data, port, admin_port=admin_port, postgres_db=database)
    elif spec.kind == "reference":
        argv = [
            str(ref_venv / "bin" / "twist"), "wormhole-mailbox",
            f"--port=tcp:{port}:interface=127.0.0.1",
            f"--channel-db={data}/channel.sqlite", f"--usage-db={data}/usage.sqlite",
        ]  # fmt: skip
    else:
        lib = {"trivial-websockets": "websockets", "trivial-picows": "picows"}.get(
            spec.key, "aiohttp"
        )
        if lib == "picows":  # not in this repository's venv: its own side venv
            py = str(PICOWS_VENV / "bin" / "python")
        argv = [py, str(BENCH / "trivial_server.py"), "--port", str(port), "--lib", lib]
    return Server(spec, argv, data, port)


# --- measuring --------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(q * len(s)) - 1))
    return s[k]


@dataclass
class LevelResult:
    concurrency: int
    procs: int
    measure: float
    completed: int = 0
    started: int = 0
    failed: int = 0
    unfinished: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    rate: float = 0.0
    exchange_p50: float | None = None
    exchange_p99: float | None = None
    delivery_p50: float | None = None
    delivery_p99: float | None = None
    #: one side's connect until its welcome, p50: how long an exchange waits to be taken on
    connect_p50: float | None = None
    server_cpu: float = 0.0
    cpu_per_exchange_ms: float | None = None
    #: the part of server_cpu the garbage collector ran (None: not measured)
    gc_seconds: float | None = None
    gc_per_exchange_ms: float | None = None
    #: the part of server_cpu spent by the PostgreSQL cluster (0 on SQLite)
    database_cpu: float = 0.0
    database_cpu_per_exchange_ms: float | None = None
    #: of database_cpu, the cluster's own processes' (WAL writer, checkpointer, ...)
    database_cluster_cpu: float = 0.0
    #: the window's database_counters() differences (WAL bytes); {} on SQLite
    database_counts: dict[str, float] = field(default_factory=dict)
    server_cores: float = 0.0
    generator_cores: float = 0.0
    generator_cpu_per_exchange_ms: float | None = None
    server_mem_kib: float = 0.0
    other_cores: float = 0.0
    warmup: float = 0.0
    #: with --status-poll: the page's requests answered during the level, and failed
    status_polls: int = 0
    status_errors: int = 0


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLK_TCK


def run_level(server: Server, concurrency: int, args: argparse.Namespace) -> LevelResult:
    poller = (
        StatusPoller(server.admin_port, args.status_poll)
        if args.status_poll and server.admin_port is not None
        else contextlib.nullcontext()
    )
    with poller:
        r = _run_level(server, concurrency, args)
    if isinstance(poller, StatusPoller):
        r.status_polls, r.status_errors = poller.polls, poller.errors
    return r


def _run_level(server: Server, concurrency: int, args: argparse.Namespace) -> LevelResult:
    procs = 1 if concurrency < args.procs_from else args.procs
    procs = max(1, min(procs, concurrency))
    measure, drain = args.measure, args.drain
    start_at = time.time() + 0.5
    shares = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    gens = []
    outputs = []
    for i, share in enumerate(shares):
        outputs.append(Path(tempfile.mkdtemp(prefix="bench-gen-")) / f"gen{i}.json")
        argv = [
            main_python(), str(BENCH / "loadgen.py"), "exchanges", "--sync",
            "--url", server.url, *(["--url-b", server.url_b] if server.url_b else []),
            "--concurrency", str(share),
            "--start-at", repr(start_at), "--warmup", str(args.warmup),
            "--warmup-max", str(args.warmup_max), "--measure", str(measure),
            "--drain", str(drain), "--messages", str(args.messages),
            "--client", args.client, "--ramp", str(args.ramp), "--output", str(outputs[-1]),
        ]  # fmt: skip
        gens.append(
            subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        )
    # every generator reaches its steady state (or the warm-up cap); then one window
    warmups = []
    for g in gens:
        assert g.stdout is not None
        line = g.stdout.readline()
        warmups.append(json.loads(line)["steady"] - start_at if line.strip() else None)
    window_start = time.time() + 0.2
    for g in gens:
        assert g.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            g.stdin.write(f"{window_start!r}\n")
            g.stdin.flush()
    time.sleep(max(0.0, window_start - time.time()))
    counts0 = server.database_counters()
    (nodes0, back0, aux0), busy0 = server.cpu_split(), machine_busy_seconds()
    gc0 = server.gc_seconds()
    time.sleep(max(0.0, window_start + measure - time.time()))
    gc1 = server.gc_seconds()
    (nodes1, back1, aux1), busy1 = server.cpu_split(), machine_busy_seconds()
    counts1 = server.database_counters()
    db0, db1 = back0 + aux0, back1 + aux1
    cpu0, cpu1 = nodes0 + db0, nodes1 + db1
    mem = server.memory_kib()
    outs = []
    for g, path in zip(gens, outputs, strict=True):
        try:
            g.wait(timeout=drain + 60)
        except subprocess.TimeoutExpired:
            g.kill()
            g.wait()
        if g.returncode != 0 or not path.exists():
            raise RuntimeError(f"load generator failed (exit {g.returncode})")
        outs.append(json.loads(path.read_bytes()))
        shutil.rmtree(path.parent, ignore_errors=True)
    r = LevelResult(concurrency, procs, measure)
    r.warmup = max((w for w in warmups if w is not None), default=0.0)
    exch: list[float] = []
    deliv: list[float] = []
    conn: list[float] = []
    failures: Counter[str] = Counter()
    gen_cpu = 0.0
    for o in outs:
        r.completed += o["completed_in_window"]
        r.started += o["started"]
        r.failed += o["failed"]
        r.unfinished += o["unfinished"]
        failures.update(o["failures"])
        exch += o["exchange_seconds"]
        deliv += o["delivery_seconds"]
        conn += o["connect_seconds"]
        gen_cpu += o["generator_cpu"]
    r.failures = dict(failures)
    r.rate = r.completed / measure
    r.exchange_p50, r.exchange_p99 = pct(exch, 0.50), pct(exch, 0.99)
    r.delivery_p50, r.delivery_p99 = pct(deliv, 0.50), pct(deliv, 0.99)
    r.connect_p50 = pct(conn, 0.50)
    r.server_cpu = cpu1 - cpu0
    r.database_cpu = db1 - db0
    r.database_cluster_cpu = aux1 - aux0
    if counts0 and counts1:
        r.database_counts = {k: counts1[k] - counts0[k] for k in counts0}
    if gc0 is not None and gc1 is not None:
        r.gc_seconds = gc1 - gc0
    r.server_cores = r.server_cpu / measure
    r.generator_cores = gen_cpu / measure
    r.other_cores = max(0.0, (busy1 - busy0) / measure - r.server_cores - r.generator_cores)
    r.server_mem_kib = mem
    if r.completed:
        r.cpu_per_exchange_ms = 1000 * r.server_cpu / r.completed
        r.database_cpu_per_exchange_ms = 1000 * r.database_cpu / r.completed
        if r.gc_seconds is not None:
            r.gc_per_exchange_ms = 1000 * r.gc_seconds / r.completed
        r.generator_cpu_per_exchange_ms = 1000 * gen_cpu / r.completed
    return r


def wait_for_quiet(limit: float) -> float:
    """Wait (at most `limit` s) until the machine is nearly idle; return the busy cores seen."""
    deadline = time.time() + limit
    busy = 0.0
    while True:
        b0 = machine_busy_seconds()
        time.sleep(1.0)
        busy = machine_busy_seconds() - b0
        if busy < 0.15 or time.time() >= deadline:
            return busy


def run_idle(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """Hold idle bound connections step by step; memory per connection at each step."""
    time.sleep(1.0)
    base = server.memory_kib()
    argv = [
        main_python(), str(BENCH / "loadgen.py"), "idle", "--url", server.url,
        "--steps", args.idle_steps, "--client", args.client,
        "--time-limit", str(args.idle_time_limit),
    ]  # fmt: skip
    gen = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    assert gen.stdout is not None and gen.stdin is not None
    steps = []
    most = 0
    try:
        for line in gen.stdout:
            step = json.loads(line)
            mem = server.memory_kib()
            held = step["held"]
            step["server_kib"] = mem
            step["kib_per_conn"] = (mem - base) / held if held else None
            steps.append(step)
            most = max(most, held)
            log(
                f"    idle {step['target']:>6}: held {held}, {step['seconds']}s, "
                f"{step['kib_per_conn'] or 0:.1f} KiB/conn, failures {step['failures']}"
            )
            gen.stdin.write("\n")
            gen.stdin.flush()
        gen.wait(timeout=60)
    except (BrokenPipeError, subprocess.TimeoutExpired):
        gen.kill()
        gen.wait()
    last = steps[-1] if steps else {}
    if last.get("time_limited"):
        stopped = f"time limit {args.idle_time_limit:g} s"
    elif last.get("failures"):
        stopped = "failures"
    else:
        stopped = "all held"
    return {
        "base_kib": base,
        "steps": steps,
        "most_held": most,
        "stopped": stopped,
        "alive": server.alive(),
        "storage": server.spec.storage,
    }


def profile_level(server: Server, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """py-spy on the server during one extra window at 100 in flight (not in the table)."""
    tools = ensure_venv(CACHE / "tools-venv", TOOLS_SPEC, "py-spy")
    raw = out / f"{server.spec.key}-profile.txt"
    duration = int(args.warmup + args.measure + 2)
    spy = subprocess.Popen(
        [
            str(tools / "bin" / "py-spy"),
            "record",
            "--pid",
            str(server.proc.pid),  # type: ignore[union-attr]
            "--rate",
            "200",
            "--format",
            "raw",
            "--output",
            str(raw),
            "--duration",
            str(duration),
            "--subprocesses",
            # py-spy cannot read native stacks without pausing the process it samples
            *(["--native"] if args.native else ["--nonblocking"]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    level = run_level(server, 100, args)
    try:
        spy.wait(timeout=duration + 30)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()
    summary = summarise_profile(raw) if raw.exists() else {}
    if raw.exists():
        summary["loop_samples"], summary["loop_areas"] = profile_areas(raw)
    summary["rate"] = level.rate
    summary["file"] = str(raw)
    return summary


def summarise_profile(path: Path, top: int = 25) -> dict[str, Any]:
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        own[_short(frames[-1])] += count
        for f in {_short(f) for f in frames}:
            incl[f] += count
    return {
        "samples": total,
        "self": [(f, round(100 * c / total, 1)) for f, c in own.most_common(top)] if total else [],
        "inclusive": [(f, round(100 * c / total, 1)) for f, c in incl.most_common(top * 2)]
        if total
        else [],
    }


#: where the event-loop thread's time goes, by the innermost matching frame
PROFILE_AREAS = [
    ("sending frames (aiohttp writer, socket write)", ["WebSocketResponse.send_str",
     "WebSocketWriter."]),
    ("protocol logic (Session.receive)", ["Session.receive"]),
    ("group commit, loop side (submit, executor hand-off)", ["GroupCommitter.", "run_in_executor",
     "ThreadPoolExecutor.submit", "_chain_future", "_call_check_cancel", "_copy_future_state"]),
    ("outbox machinery (Outbox task, wait_for, wait, Event)", ["Outbox.", "wait_for", "Event.",
     "asyncio/tasks.py"]),
    ("frame handling, rest (Connection.handle_frame)", ["Connection.handle_frame"]),
    ("WebSocket upgrade (WebSocketResponse.prepare)", ["WebSocketResponse.prepare", "_handshake",
     "StreamResponse"]),
    ("connection setup (Connection.__init__, admission, address, welcome)", ["Connection.__init__",
     "_admission", "client_address", "_welcome", "is_trusted"]),
    ("teardown (disconnect, close)", ["Session.disconnect", "close", "_set_closing"]),
    ("HTTP request handling (aiohttp web_protocol, app, parser)", ["web_protocol.py",
     "http_parser", "web_app.py", "web_request"]),
    ("receive loop (WebSocketResponse.receive)", ["WebSocketResponse.receive", "__anext__",
     "Connection.run"]),
]  # fmt: skip


def profile_areas(path: Path) -> tuple[int, list[tuple[str, float]]]:
    """Event-loop thread samples (stacks under Runner.run) by area, innermost match first."""
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit() or "Runner.run" not in stack:
            continue
        count = int(n)
        total += count
        for frame in reversed(stack.split(";")):
            hit = next((a for a, keys in PROFILE_AREAS if any(k in frame for k in keys)), None)
            if hit is not None:
                counts[hit] += count
                break
        else:
            counts["event loop itself (uvloop, syscalls, callbacks, GC)"] += count
    return total, [(a, round(100 * c / total, 1)) for a, c in counts.most_common()] if total else []


def _short(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py)" : per function, not per line
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    file = where.rsplit(":", 1)[0]
    parts = file.split("/")
    short = "/".join(parts[-2:]) if len(parts) >= 2 else file
    return f"{name} ({short})" if where else name


# --- the table ----------------------------------------------------------------------------


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1000
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2f} ms"


def fmt_ratio(a: Any, b: Any) -> str:
    if isinstance(a, str) or isinstance(b, str):
        a = None if isinstance(a, str) else a
        b = None if isinstance(b, str) else b
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    if r >= 10:
        return f"{r:.0f}x"
    return f"{r:.2f}x" if r >= 0.01 else f"{r:.4f}x"


def build_table(results: dict[str, Any], args: argparse.Namespace) -> str:
    """One markdown table: a row per figure, a column per server, and the ratios.

    Ratios are always Pigeonhole's figure divided by the other server's (PostgreSQL's by
    SQLite's, two nodes' by one's): above 1 is better for rates and connections held,
    below 1 is better for times, CPU and memory. Columns no server filled are left out.
    """
    P, R, T, S, W = "pigeonhole", "reference", "trivial", "reference-tmpfs", "trivial-websockets"
    X, G, G2 = "trivial-picows", "pigeonhole-pg", "pigeonhole-pg2"
    keys = (P, R, T, S, W, X, G, G2)
    servers = results["servers"]
    lv = {k: {lvl["concurrency"]: lvl for lvl in v.get("levels", [])} for k, v in servers.items()}
    idle = {k: v.get("idle") for k, v in servers.items()}
    head = [
        "figure", "Pigeonhole (disk)", "reference (disk)", "Pigeonhole ÷ reference",
        "trivial aiohttp (memory)", "Pigeonhole ÷ trivial", "reference (tmpfs)",
        "trivial websockets (memory)", "trivial picows (memory)",
        "Pigeonhole (PostgreSQL, 1 node)", "PostgreSQL ÷ SQLite",
        "Pigeonhole (PostgreSQL, 2 nodes)", "2 nodes ÷ 1 node",
    ]  # fmt: skip
    rows: list[list[str]] = []

    def add(name: str, vals: dict[str, Any], fmt: Any, ratios: bool = True) -> None:
        if all(v is None for v in vals.values()):
            return
        r1 = fmt_ratio(vals[P], vals[R]) if ratios else ""
        r2 = fmt_ratio(vals[P], vals[T]) if ratios else ""
        r3 = fmt_ratio(vals[G], vals[P]) if ratios else ""
        r4 = fmt_ratio(vals[G2], vals[G]) if ratios else ""
        rows.append([name, fmt(vals[P]), fmt(vals[R]), r1, fmt(vals[T]), r2, fmt(vals[S]),
                     fmt(vals[W]), fmt(vals[X]), fmt(vals[G]), r3, fmt(vals[G2]), r4])  # fmt: skip

    def level_row(name: str, attr: str, c: int, fmt: Any) -> None:
        vals = {}
        for k in keys:
            entry = lv.get(k, {}).get(c)
            vals[k] = None if entry is None else entry.get(attr)
        add(name, vals, fmt)

    def rate(v: Any) -> str:
        return "-" if v is None else f"{v:,.0f}/s" if v >= 10 else f"{v:.1f}/s"

    def cpu(v: Any) -> str:
        return "-" if v is None else f"{v:.2f} ms"

    def cores(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    def text(v: Any) -> str:
        return "-" if v is None else str(v)

    def kib(v: Any) -> str:
        return "-" if v is None else f"{v:.1f} KiB"

    def count(v: Any) -> str:
        return "-" if v is None else v if isinstance(v, str) else f"{v:,}"

    levels = sorted({c for per in lv.values() for c in per})
    for c in levels:
        level_row(f"exchanges/s, {c} in flight", "rate", c, rate)
    for c in levels:
        level_row(f"exchange p50, {c} in flight", "exchange_p50", c, fmt_ms)
        level_row(f"exchange p99, {c} in flight", "exchange_p99", c, fmt_ms)
    for c in levels:
        level_row(f"message add→peer p50, {c} in flight", "delivery_p50", c, fmt_ms)
        level_row(f"message add→peer p99, {c} in flight", "delivery_p99", c, fmt_ms)
    for c in levels:
        level_row(f"connect until welcome p50, {c} in flight", "connect_p50", c, fmt_ms)
    for c in levels:
        level_row(f"server CPU per exchange, {c} in flight", "cpu_per_exchange_ms", c, cpu)
    for c in levels:
        level_row(f"server cores busy, {c} in flight", "server_cores", c, cores)
    for c in levels:
        level_row(f"generator cores busy, {c} in flight", "generator_cores", c, cores)
    for c in levels:
        level_row(f"other processes' cores busy, {c} in flight", "other_cores", c, cores)
    for c in levels:
        vals = {}
        for k in keys:
            e = lv.get(k, {}).get(c)
            vals[k] = (
                None
                if e is None
                else f"{e['failed']} of {e['started']}"
                + (f" (+{e['unfinished']} unfinished)" if e["unfinished"] else "")
            )
        add(f"failed exchanges, {c} in flight", vals, text, ratios=False)
    steps = [int(s) for s in args.idle_steps.split(",") if s]
    for n in steps[:2]:
        vals = {}
        for k in keys:
            st = next((s for s in (idle.get(k) or {}).get("steps", []) if s["target"] == n), None)
            vals[k] = None if st is None or st["held"] < n else st["kib_per_conn"]
        add(f"memory per idle connection, {n:,} held", vals, kib)
    most: dict[str, Any] = {}
    for k in keys:
        i = idle.get(k) or {}
        most[k] = i.get("most_held")
        if most[k] is not None and i.get("stopped") != "all held":
            most[k] = f"{most[k]:,} ({i.get('stopped')})"
    add(f"most idle connections held (tried {steps[-1]:,})", most, count)
    filled = [i for i in range(len(head)) if i == 0 or any(r[i] not in ("-", "") for r in rows)]
    return markdown_table([head[i] for i in filled], [[r[i] for i in filled] for r in rows])


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table with its columns padded to line up in plain text too."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return "\n".join(lines)


TRIVIALS = [("trivial", "trivial aiohttp"), ("trivial-websockets", "trivial websockets")]


def check_targets(results: dict[str, Any]) -> list[str]:
    servers = results["servers"]

    def lvl(key: str, c: int) -> dict[str, Any] | None:
        for e in servers.get(key, {}).get("levels", []):
            if e["concurrency"] == c:
                return e  # type: ignore[no-any-return]
        return None

    out: list[str] = []

    def verdict(ok: bool | None, text: str) -> None:
        mark = "n/a " if ok is None else ("PASS" if ok else "FAIL")
        out.append(f"- {mark} {text}")

    p, r, s = (lvl(k, 100) for k in ("pigeonhole", "reference", "reference-tmpfs"))
    trivials = [(name, lvl(key, 100)) for key, name in TRIVIALS]
    for name, t in trivials:
        if p and t:
            q = p["rate"] / t["rate"] if t["rate"] else 0
            verdict(
                q >= 0.6,
                f"exchanges/s at 100 in flight >= 60% of {name}: "
                f"{p['rate']:.0f} vs {t['rate']:.0f}/s ({q:.0%})",
            )
    if p and r:
        q = p["rate"] / r["rate"] if r["rate"] else math.inf
        verdict(
            q >= 10,
            f"exchanges/s at 100 in flight >= 10x reference: "
            f"{p['rate']:.0f} vs {r['rate']:.1f}/s ({q:.1f}x)",
        )
    if p and s and p["cpu_per_exchange_ms"] and s["cpu_per_exchange_ms"]:
        q = p["cpu_per_exchange_ms"] / s["cpu_per_exchange_ms"]
        verdict(
            q <= 0.5,
            f"server CPU per exchange <= half the reference on tmpfs: "
            f"{p['cpu_per_exchange_ms']:.2f} vs {s['cpu_per_exchange_ms']:.2f} ms ({q:.2f}x)",
        )
    if p and r and p["delivery_p99"] and r["delivery_p99"]:
        q = p["delivery_p99"] / r["delivery_p99"]
        verdict(
            q <= 0.1,
            f"message p99 at 100 in flight <= 1/10 reference: "
            f"{fmt_ms(p['delivery_p99'])} vs {fmt_ms(r['delivery_p99'])} ({q:.3f}x)",
        )
    for name, t in trivials:
        if p and t and p["delivery_p99"] and t["delivery_p99"]:
            q = p["delivery_p99"] / t["delivery_p99"]
            verdict(
                q <= 2,
                f"message p99 at 100 in flight <= 2x {name}: "
                f"{fmt_ms(p['delivery_p99'])} vs {fmt_ms(t['delivery_p99'])} ({q:.2f}x)",
            )
    for c in (500, 1000):
        e = lvl("pigeonhole", c)
        if e is not None:
            verdict(
                e["failed"] == 0,
                f"no failed exchange at {c} in flight: {e['failed']} of {e['started']}"
                + (f" {e['failures']}" if e["failures"] else ""),
            )
    pi = servers.get("pigeonhole", {}).get("idle")
    ri = servers.get("reference", {}).get("idle")
    if pi and ri:
        for ps, rs in zip(pi["steps"], ri["steps"], strict=False):
            if ps["kib_per_conn"] and rs["kib_per_conn"] and ps["target"] == rs["target"]:
                q = ps["kib_per_conn"] / rs["kib_per_conn"]
                verdict(
                    q <= 0.5,
                    f"memory per idle connection at {ps['target']:,} <= half the reference: "
                    f"{ps['kib_per_conn']:.1f} vs {rs['kib_per_conn']:.1f} KiB ({q:.2f}x)",
                )
    if pi:
        verdict(pi["most_held"] >= 10000, f"10,000 idle connections held: {pi['most_held']:,}")
    p1000 = lvl("pigeonhole", 1000) or p
    if p1000:
        verdict(
            None,
            f"both cores: Pigeonhole used {p1000['server_cores']:.2f} cores at "
            f"{p1000['concurrency']} in flight",
        )
    return out


# --- main ---------------------------------------------------------------------------------


SPECS = {
    "pigeonhole": ServerSpec("pigeonhole", "Pigeonhole (disk)", "pigeonhole", "disk"),
    "pigeonhole-pg": ServerSpec(
        "pigeonhole-pg", "Pigeonhole (PostgreSQL, 1 node)", "pigeonhole", "postgresql"
    ),
    "pigeonhole-pg2": ServerSpec(
        "pigeonhole-pg2", "Pigeonhole (PostgreSQL, 2 nodes)", "pigeonhole", "postgresql", 2
    ),
    "reference": ServerSpec("reference", "reference (disk)", "reference", "disk"),
    "trivial": ServerSpec("trivial", "trivial aiohttp (memory)", "trivial", "memory"),
    "reference-tmpfs": ServerSpec("reference-tmpfs", "reference (tmpfs)", "reference", "tmpfs"),
    "trivial-websockets": ServerSpec(
        "trivial-websockets", "trivial websockets (memory)", "trivial", "memory"
    ),
    "trivial-picows": ServerSpec("trivial-picows", "trivial picows (memory)", "trivial", "memory"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description="Pigeonhole vs the reference mailbox server")
    ap.add_argument(
        "--servers",
        default="trivial,pigeonhole,reference,reference-tmpfs,trivial-websockets,trivial-picows",
    )
    ap.add_argument("--levels", default="1,10,100,500,1000", help="exchanges in flight")
    ap.add_argument("--tmpfs-levels", default="10,100", help="levels for reference-tmpfs")
    ap.add_argument("--websockets-levels", default="100", help="levels for trivial-websockets")
    ap.add_argument("--picows-levels", default="100", help="levels for trivial-picows")
    ap.add_argument("--warmup", type=float, default=2.0, help="least warm-up seconds per level")
    ap.add_argument(
        "--warmup-max",
        type=float,
        default=20.0,
        help="most warm-up seconds (warm-up ends once every slot finished one exchange)",
    )
    ap.add_argument(
        "--quiet-wait", type=float, default=10.0, help="wait for an idle machine before a server"
    )
    ap.add_argument("--measure", type=float, default=6.0, help="seconds measured per level")
    ap.add_argument("--drain", type=float, default=20.0, help="most seconds to finish a level")
    ap.add_argument("--ramp", type=float, default=1.0, help="seconds over which slots start")
    ap.add_argument("--messages", type=int, default=1, help="application messages per side")
    ap.add_argument(
        "--procs", type=int, default=1, help="generator processes (from --procs-from in flight)"
    )
    ap.add_argument("--procs-from", type=int, default=10, help="level from which --procs apply")
    ap.add_argument("--client", default="raw", choices=["raw", "aiohttp", "websockets"])
    ap.add_argument(
        "--idle-steps", default=None, help="default 1000,10000,<open-file hard limit - 200>"
    )
    ap.add_argument("--idle-time-limit", type=float, default=60.0)
    ap.add_argument("--no-idle", action="store_true")
    ap.add_argument("--profile", action="store_true", help="py-spy Pigeonhole at 100 in flight")
    ap.add_argument("--native", action="store_true", help="with --profile: native frames too")
    ap.add_argument("--pigeonhole-arg", action="append", default=[], help="extra serve option")
    ap.add_argument(
        "--status-poll",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep Pigeonhole's status page open: /status.json every SECONDS (the page's "
        "default is 2) through each level",
    )
    ap.add_argument(
        "--pigeonhole-python",
        default=None,
        help="interpreter for Pigeonhole (default: this repository's .venv)",
    )
    ap.add_argument("--quick", action="store_true", help="short windows (smoke test)")
    ap.add_argument("--out", default=str(BENCH / "results"))
    ap.add_argument("--keep", action="store_true", help="keep the servers' data directories")
    args = ap.parse_args()
    if args.idle_steps is None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        most = min(hard if hard != resource.RLIM_INFINITY else 1 << 20, 60000) - 200
        args.idle_steps = f"1000,10000,{most}"
    if args.quick:
        args.warmup, args.warmup_max, args.measure, args.drain = 1.0, 10.0, 3.0, 15.0
        args.idle_steps = "1000,10000"
    args.levels = [int(x) for x in args.levels.split(",") if x]
    tmpfs_levels = [int(x) for x in args.tmpfs_levels.split(",") if x]
    ws_levels = [int(x) for x in args.websockets_levels.split(",") if x]
    picows_levels = [int(x) for x in args.picows_levels.split(",") if x]
    wanted = [s for s in args.servers.split(",") if s]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    ref_venv = CACHE / "ref-venv"
    if any(SPECS[k].kind == "reference" for k in wanted):
        ensure_venv(ref_venv, [REF_SPEC], "twist")
    if "trivial-picows" in wanted:
        ensure_venv(PICOWS_VENV, PICOWS_SPEC, "python", imports="picows, orjson, uvloop")
    disk_fs = fs_type(disk_tmpdir_probe())
    began = time.time()
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cores": os.cpu_count(),
        "disk_fs": disk_fs,
        "client": args.client,
        "procs": args.procs,
        "procs_from": args.procs_from,
        "warmup": args.warmup,
        "measure": args.measure,
        "messages": args.messages,
        "status_poll": args.status_poll,
        "servers": {},
    }
    for key in wanted:
        spec = SPECS[key]
        levels = {
            "reference-tmpfs": tmpfs_levels,
            "trivial-websockets": ws_levels,
            "trivial-picows": picows_levels,
        }.get(key, args.levels)
        entry: dict[str, Any] = {"label": spec.label, "levels": []}
        results["servers"][key] = entry
        server = make_server(spec, ref_venv, args.pigeonhole_arg, args.pigeonhole_python)
        background = wait_for_quiet(args.quiet_wait)
        entry["background_cores"] = background
        log(f"== {spec.label}: {server.url}, data in {server.data_dir}")
        for peer in server.peers:
            log(f"   side B on {peer.url}, data in {peer.data_dir}")
        if background >= 0.15:
            log(f"  (the machine is busy with other work: {background:.2f} cores)")
        try:
            server.start()
            for c in levels:
                lr = run_level(server, c, args)
                entry["levels"].append(lr.__dict__)
                log(
                    f"  {c:>5} in flight: {lr.rate:8.1f}/s  exchange p50 {fmt_ms(lr.exchange_p50)}"
                    f" p99 {fmt_ms(lr.exchange_p99)}  msg p50 {fmt_ms(lr.delivery_p50)}"
                    f" p99 {fmt_ms(lr.delivery_p99)}  connect p50 {fmt_ms(lr.connect_p50)}"
                    f"  cpu/ex {lr.cpu_per_exchange_ms or 0:.2f} ms"
                    f"  server {lr.server_cores:.2f} cores, gen {lr.generator_cores:.2f} cores,"
                    f" other {lr.other_cores:.2f} cores, warm-up {lr.warmup:.1f}s"
                    f" ({lr.procs} procs)  failed {lr.failed}/{lr.started}"
                    f"{' ' + str(lr.failures) if lr.failures else ''}"
                    f"{f' unfinished {lr.unfinished}' if lr.unfinished else ''}"
                    f"{f'  status polls {lr.status_polls}' if lr.status_polls else ''}"
                    f"{f' ({lr.status_errors} failed)' if lr.status_errors else ''}"
                )
                if not server.alive():
                    log(f"  {spec.label} died; see {server.log_path}")
                    break
            if args.profile and key == "pigeonhole" and server.alive():
                entry["profile"] = profile_level(server, args, out)
                log(f"  profile: {entry['profile'].get('file')}")
        finally:
            server.stop()
            if not args.keep:
                for node in (server, *server.peers):
                    shutil.rmtree(node.data_dir, ignore_errors=True)
        if not args.no_idle and key in ("pigeonhole", "reference", "trivial", "trivial-picows"):
            # the reference accepts ~100 connections/s with a disk database (commits per
            # connection): hold its idle connections with the databases on tmpfs, where
            # memory per connection is the same and 10,000 take seconds, not minutes
            idle_spec = SPECS["reference-tmpfs"] if key == "reference" else spec
            server = make_server(idle_spec, ref_venv, args.pigeonhole_arg, args.pigeonhole_python)
            try:
                server.start()
                entry["idle"] = run_idle(server, args)
            finally:
                server.stop()
                if not args.keep:
                    shutil.rmtree(server.data_dir, ignore_errors=True)
    results["seconds"] = round(time.time() - began, 1)
    table = build_table(results, args)
    targets = check_targets(results)
    procs = (
        f"{args.procs} processes from {args.procs_from} in flight (1 below)"
        if args.procs > 1
        else "1 process"
    )
    gen_note = (
        f"generator: bench/loadgen.py, client `{args.client}`, {procs}; "
        f"{args.messages} application message(s) per side; "
        f"each level warms up until every slot finished one exchange ({args.warmup:g} s at "
        f"least, {args.warmup_max:g} s at most), then {args.measure:g} s are measured"
    )
    header = (
        f"Run {results['started']}, {results['cores']} cores, disk databases on "
        f"{disk_fs}, {results['seconds']} s in all. {gen_note}."
    )
    md = [header, "", table]
    if targets:
        md += ["", "Targets (issue 4):", *targets]
    prof = results["servers"].get("pigeonhole", {}).get("profile")
    if prof and prof.get("samples"):
        md += ["", f"Pigeonhole profile at 100 in flight ({prof['samples']} samples, "
               f"{prof['rate']:.0f}/s under py-spy), self time:"]  # fmt: skip
        md += [f"    {p:5.1f}%  {f}" for f, p in prof["self"][:20]]
        if prof.get("loop_areas"):
            md += ["", f"Event-loop thread by area ({prof['loop_samples']} samples):"]
            md += [f"    {p:5.1f}%  {a}" for a, p in prof["loop_areas"]]
    text = "\n".join(md)
    print(text)
    (out / "latest.md").write_text(text + "\n")
    (out / "latest.json").write_text(json.dumps(results, indent=1) + "\n")


def disk_tmpdir_probe() -> Path:
    d = disk_tmpdir("bench-probe-")
    d.rmdir()
    return d.parent


if __name__ == "__main__":
    os.chdir(REPO)
    main()
