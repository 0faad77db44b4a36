"""Server memory and disk use against bytes stored in mailboxes, three servers side by side.

    .venv/bin/python bench/stored_rss.py                 # 0, 256 MiB and 1 GiB; a few minutes
    .venv/bin/python bench/stored_rss.py --steps 0,64    # a smoke test

Servers (`--servers`, each started alone by bench/run.py's `Server` on 127.0.0.1 on a
free port with a fresh data directory on disk, `/var/tmp`, and stopped by its PID):

  head       this checkout: `.venv/bin/python -m pigeonhole serve`, default options (or,
             with `--head-commit`, a worktree of that commit at `--head-dir`, run as below)
  before     the same interpreter with PYTHONPATH at a worktree of `--before-commit`
             (made with `git worktree add` at `--before-dir` if missing): bodies held in
             memory as hex strings and stored as hex text
  reference  `twist wormhole-mailbox` 0.8.0 from bench/run.py's reference venv

Both Pigeonholes get run.py's `--max-connections 60000 --max-connections-per-address
60000` and nothing else: every connection sends its own `X-Real-IP` (10.x.y.z; the
loopback is a trusted proxy by default), so the quotas per client address are met as
they would be by many clients, not lifted.

Storing goes through the protocol, `--concurrency` connections at a time: connect with
`X-Real-IP` and
`X-Real-Port`, wait for `welcome`, `bind`, `open` a fresh mailbox, then eight `add`s of a
1 MiB random body (a 2 MiB hex frame), each after the server's echo of the one before
(the echo is its confirmation that the message is stored), so the mailbox holds 8 MiB
(`--max-mailbox-bytes`); then the WebSocket is closed without a `close` command, so the
mailbox and its messages stay. At each step (cumulative: 0, then up to 256 MiB, then
up to 1 GiB) the script waits `--settle` seconds and reads VmRSS and VmHWM
(/proc/PID/status) of the server's process and its descendants: for Pigeonhole the
server process plus its store helper (`pigeonhole.store.sqlite.helper_main`, which writes and
fdatasyncs each batch), summed and shown apart; and the data directory's size on disk
(allocated blocks of every file in it, WAL included, the server's log excluded).

Only processes this script started are signalled, by their PID; data directories are
removed at the end (`--keep` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import run  # bench/run.py: venvs, temporary directories, Server
from websockets.asyncio.client import connect

MiB = 1024 * 1024
BODY_BYTES = MiB  # --max-body-bytes
MAILBOX_BYTES = 8 * MiB  # --max-mailbox-bytes
APPID = "lothar.com/wormhole/bench-stored"
SPECS = {
    "head": run.ServerSpec("head", "Pigeonhole HEAD", "pigeonhole", "disk"),
    "before": run.ServerSpec("before", "Pigeonhole before", "pigeonhole", "disk"),
    "reference": run.ServerSpec("reference", "reference 0.8.0", "reference", "disk"),
}


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


# --- the checkouts ---------------------------------------------------------------------


def git_rev(where: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def ensure_worktree(where: Path, commit: str) -> Path:
    """A worktree of `commit` at `where` (made once); returns its `src`."""
    if not (where / "src" / "pigeonhole").is_dir():
        log(f"making a worktree of {commit} at {where}")
        subprocess.run(
            ["git", "-C", str(run.REPO), "worktree", "add", "--detach", str(where), commit],
            check=True,
        )
    want = subprocess.run(
        ["git", "-C", str(run.REPO), "rev-parse", "--short", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    have = git_rev(where)
    if have != want:
        raise SystemExit(f"{where} is at {have}, not {commit} ({want})")
    return where / "src"


def imported_from(pythonpath: str | None) -> str:
    """Where `import pigeonhole` resolves with this PYTHONPATH (what the server runs)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(
        [run.main_python(), "-c", "import pigeonhole; print(pigeonhole.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        check=True,
    )
    return out.stdout.strip()


# --- measuring ----------------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])  # kB
    return out


def proc_role(pid: int, root: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "gone"
    if pid == root:
        return "server"
    if b"pigeonhole.store.sqlite.helper_main" in argv:
        return "store helper"
    return "child"


def memory(server: run.Server) -> dict[str, Any]:
    """VmRSS and VmHWM (MiB) of the server and each descendant, and their sums."""
    assert server.proc is not None
    root = server.proc.pid
    parts = []
    for pid in server.pids():
        try:
            st = proc_status(pid)
        except OSError:
            continue
        parts.append(
            {
                "pid": pid,
                "role": proc_role(pid, root),
                "rss_mib": st.get("VmRSS", 0) / 1024,
                "hwm_mib": st.get("VmHWM", 0) / 1024,
            }
        )
    return {
        "rss_mib": sum(p["rss_mib"] for p in parts),
        "hwm_mib": sum(p["hwm_mib"] for p in parts),
        "processes": parts,
    }


def disk_use(data_dir: Path) -> dict[str, Any]:
    """Allocated bytes (MiB) of every file under `data_dir` but the server's log."""
    files: dict[str, float] = {}
    for dirpath, _dirs, names in os.walk(data_dir):
        for name in names:
            path = Path(dirpath) / name
            if path.name == "server.log":
                continue
            with contextlib.suppress(OSError):
                files[str(path.relative_to(data_dir))] = path.stat().st_blocks * 512 / MiB
    return {"mib": sum(files.values()), "files": files}


def body_storage(data_dir: Path, key: str) -> str:
    """How the stored bodies look in the channel database (after the server stopped)."""
    db = data_dir / ("db/channel.sqlite" if key != "reference" else "channel.sqlite")
    if not db.exists():
        return "no channel database"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        kinds = con.execute(
            "SELECT typeof(body), count(*), sum(length(body)) FROM messages GROUP BY 1"
        ).fetchall()
        version = "-"
        with contextlib.suppress(sqlite3.Error):
            version = str(con.execute("SELECT version FROM version").fetchone()[0])
    finally:
        con.close()
    shown = ", ".join(f"{n} {t} bodies of {(s or 0) / MiB:.0f} MiB in all" for t, n, s in kinds)
    return f"schema version {version}: {shown or 'no messages'}"


# --- storing --------------------------------------------------------------------------------


@dataclass
class Filler:
    url: str
    concurrency: int
    next_conn: int = 0
    stored: int = 0  # body bytes the server confirmed (echoed)
    errors: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0  # mailboxes being filled now

    def address(self, n: int) -> str:
        return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"

    async def one_mailbox(self, n: int) -> None:
        side = os.urandom(5).hex()
        async with connect(
            self.url,
            # the reference needs X-Real-Port with X-Real-IP (a 500 without it)
            additional_headers={"X-Real-IP": self.address(n), "X-Real-Port": "40000"},
            compression=None,
            max_size=None,
            ping_interval=None,
            open_timeout=30,
            close_timeout=10,
        ) as ws:

            async def expect(kind: str, phase: str | None = None) -> dict[str, Any]:
                while True:
                    raw = await asyncio.wait_for(ws.recv(), 60)
                    msg = orjson.loads(raw)
                    t = msg.get("type")
                    if t == "error":
                        raise RuntimeError(f"server error: {msg.get('error')}")
                    if t == kind and (
                        phase is None or (msg.get("phase") == phase and msg.get("side") == side)
                    ):
                        return msg  # type: ignore[no-any-return]

            async def put(frame: dict[str, Any]) -> None:
                frame["id"] = os.urandom(2).hex()
                await ws.send(orjson.dumps(frame).decode())

            await expect("welcome")
            await put(
                {"type": "bind", "appid": APPID, "side": side, "client_version": ["bench", "0"]}
            )
            await put({"type": "open", "mailbox": f"bench-{os.urandom(8).hex()}"})
            for i in range(MAILBOX_BYTES // BODY_BYTES):
                await put({"type": "add", "phase": str(i), "body": os.urandom(BODY_BYTES).hex()})
                await expect("message", str(i))
                self.stored += BODY_BYTES
        # closed without a `close` command: the mailbox and its messages stay

    async def fill_to(self, target: int, deadline: float) -> None:
        async def worker() -> None:
            while self.stored + self.in_flight * MAILBOX_BYTES < target:
                if time.time() > deadline:
                    return
                if len(self.errors) and sum(self.errors.values()) >= 8:
                    return  # the server refuses: stop rather than spin
                n = self.next_conn = self.next_conn + 1
                self.in_flight += 1
                try:
                    await self.one_mailbox(n)
                except Exception as err:  # refused, closed, timed out: counted, shown
                    self.errors[f"{type(err).__name__}: {err}"[:200]] += 1
                finally:
                    self.in_flight -= 1

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))


# --- one server -------------------------------------------------------------------------


def make(key: str, ref_venv: Path, src: Path | None) -> run.Server:
    # the quotas per address stay at their defaults: each connection is its own address
    server = run.make_server(SPECS[key], ref_venv, [], lift_quotas=False)
    if src is not None:
        # env execs the interpreter: the PID run.Server watches is the server's
        server.argv = ["/usr/bin/env", f"PYTHONPATH={src}", *server.argv]
    return server


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [p.split(b"=", 1) for p in f.read().split(b"\0") if b"=" in p]
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def measure_server(
    key: str, args: argparse.Namespace, ref_venv: Path, src: Path | None
) -> dict[str, Any]:
    server = make(key, ref_venv, src)
    entry: dict[str, Any] = {"label": SPECS[key].label, "argv": server.argv, "steps": []}
    log(f"== {SPECS[key].label}: {server.url}, data in {server.data_dir}")
    log(f"   {' '.join(server.argv)}")
    try:
        server.start()
        assert server.proc is not None
        if SPECS[key].kind == "pigeonhole":
            pp = environ_of(server.proc.pid).get("PYTHONPATH")
            entry["pythonpath"] = pp
            entry["imports"] = imported_from(pp)
            log(f"   server PYTHONPATH={pp!r}: pigeonhole imported from {entry['imports']}")
        filler = Filler(server.url, args.concurrency)
        deadline = time.time() + args.time_limit
        took = 0.0  # seconds spent storing so far (settling not counted)
        for mib in args.steps:
            if mib * MiB > filler.stored:
                t0 = time.time()
                asyncio.run(filler.fill_to(mib * MiB, deadline))
                took += time.time() - t0
                deadline += args.settle
            time.sleep(args.settle)
            if not server.alive():
                entry["died"] = f"server exited; see {server.log_path}"
                log(f"   {entry['died']}")
                break
            mem = memory(server)
            disk = disk_use(server.data_dir)
            step = {
                "target_mib": mib,
                "stored_mib": filler.stored / MiB,
                "mailboxes": filler.next_conn,
                "seconds": took,
                "memory": mem,
                "disk": disk,
                "errors": dict(filler.errors),
            }
            entry["steps"].append(step)
            split = " + ".join(f"{p['role']} {p['rss_mib']:.0f}" for p in mem["processes"])
            log(
                f"   stored {filler.stored / MiB:7.0f} MiB in {took:6.1f} s: RSS"
                f" {mem['rss_mib']:.0f} MiB ({split}), peak {mem['hwm_mib']:.0f} MiB,"
                f" data dir {disk['mib']:.0f} MiB"
                + (f"  errors {dict(filler.errors)}" if filler.errors else "")
            )
            if filler.stored < mib * MiB:
                log(f"   stopped short of {mib} MiB")
                break
    finally:
        server.stop()
        with contextlib.suppress(sqlite3.Error):
            entry["bodies"] = body_storage(server.data_dir, key)
            log(f"   stored as: {entry['bodies']}")
        if server.log_path and server.log_path.exists():
            errs = [
                line
                for line in server.log_path.read_text(errors="replace").splitlines()
                if "ERROR" in line or "Traceback" in line or "CRITICAL" in line
            ]
            entry["log_errors"] = errs[:20]
            if errs:
                log(f"   {len(errs)} error lines in the server's log, first: {errs[0][:200]}")
        if not args.keep:
            shutil.rmtree(server.data_dir, ignore_errors=True)
    return entry


def table(results: dict[str, Any]) -> str:
    head = [
        "server",
        "stored",
        "RSS MiB (server + store helper)",
        "peak RSS MiB",
        "data dir MiB",
        "time to store",
    ]
    rows = []
    for entry in results["servers"].values():
        for s in entry["steps"]:
            procs = s["memory"]["processes"]
            split = " + ".join(f"{p['rss_mib']:.0f}" for p in procs) if len(procs) > 1 else ""
            stored = s["stored_mib"]
            shown = f"{stored / 1024:g} GiB" if stored >= 1024 else f"{stored:.0f} MiB"
            if stored < s["target_mib"]:
                shown += f" (of {s['target_mib']} MiB)"
            rows.append(
                [
                    entry["label"],
                    shown,
                    f"{s['memory']['rss_mib']:,.0f}" + (f" ({split})" if split else ""),
                    f"{s['memory']['hwm_mib']:,.0f}",
                    f"{s['disk']['mib']:,.0f}",
                    "-"
                    if not stored
                    else f"{s['seconds']:.1f} s ({stored / s['seconds']:.0f} MiB/s)",
                ]
            )
    return run.markdown_table(head, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description="server memory against bytes stored")
    ap.add_argument("--servers", default="head,before,reference")
    ap.add_argument("--steps", default="0,256,1024", help="MiB stored (cumulative)")
    ap.add_argument("--concurrency", type=int, default=8, help="connections storing at once")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds before reading memory")
    ap.add_argument(
        "--time-limit", type=float, default=180.0, help="most seconds of storing per server"
    )
    ap.add_argument(
        "--head-commit",
        default="",
        help="run `head` from a worktree of this commit (default: this working tree)",
    )
    ap.add_argument("--head-dir", default="/tmp/pigeonhole-head")
    ap.add_argument("--before-commit", default="7f6e036")
    ap.add_argument("--before-dir", default="/tmp/pigeonhole-before")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--out", default=str(run.BENCH / "results"))
    args = ap.parse_args()
    args.steps = [int(x) for x in args.steps.split(",") if x]
    wanted = [k for k in args.servers.split(",") if k]
    ref_venv = run.CACHE / "ref-venv"
    if "reference" in wanted:
        run.ensure_venv(ref_venv, [run.REF_SPEC], "twist")
    srcs: dict[str, Path | None] = {"head": None, "before": None, "reference": None}
    head = git_rev(run.REPO)
    if args.head_commit:
        srcs["head"] = ensure_worktree(Path(args.head_dir), args.head_commit)
        head = git_rev(Path(args.head_dir))
    elif subprocess.run(
        ["git", "-C", str(run.REPO), "diff", "--quiet", "HEAD", "--", "src"], check=False
    ).returncode:
        head += " + uncommitted changes in src"
    if "before" in wanted:
        srcs["before"] = ensure_worktree(Path(args.before_dir), args.before_commit)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "head": head,
        "before": git_rev(Path(args.before_dir)) if srcs["before"] else "-",
        "disk_fs": run.fs_type(Path("/var/tmp")),
        "servers": {},
    }
    began = time.time()
    for key in wanted:
        results["servers"][key] = measure_server(key, args, ref_venv, srcs[key])
    results["seconds"] = round(time.time() - began, 1)
    header = (
        f"Run {results['started']}, HEAD `{results['head']}`, before `{results['before']}`,"
        f" data on {results['disk_fs']}, {results['seconds']} s in all;"
        f" {args.concurrency} connections storing at once, one 8 MiB mailbox each"
        f" (eight 1 MiB bodies), memory read {args.settle:g} s after storing."
    )
    notes = []
    for entry in results["servers"].values():
        if entry.get("imports"):
            notes.append(f"- {entry['label']} imported pigeonhole from `{entry['imports']}`")
        if entry.get("bodies"):
            notes.append(f"- {entry['label']} channel database: {entry['bodies']}")
        for s in entry["steps"][-1:]:
            if s["errors"]:
                notes.append(f"- {entry['label']} refusals: {s['errors']}")
        if entry.get("died"):
            notes.append(f"- {entry['label']}: {entry['died']}")
    text = "\n".join([header, "", table(results), "", *notes])
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stored_rss.md").write_text(text + "\n")
    (out / "stored_rss.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    os.chdir(run.REPO)
    main()
