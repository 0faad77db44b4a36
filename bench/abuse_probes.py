"""Two ways around per-address bounds, tried as an abusive client would, before and after.

    .venv/bin/python bench/abuse_probes.py                       # this checkout only
    .venv/bin/python bench/abuse_probes.py --before-commit 5a96c28 --archive-seconds 60

1. IPv6: five addresses of one /64 (X-Real-IP through the trusted loopback proxy, as a
   proxy in front would say) each allocate nameplates, a fresh connection per
   `allocate` (the per-connection creation limit resets), until refused or 200 each.
   Prints the nameplates the /64 got, against one IPv4 address's.
2. The archive: one address posts envelopes sealed at the server's default proof of work
   (0.001; 64 KiB of data, TTL 2 s: the cheapest to seal) as fast as one core seals them,
   for `--archive-seconds` or until five posts in a row are refused. Prints the MiB
   archived and why it stopped.

Each server is `pigeonhole serve` with its defaults on a free loopback port and a fresh
data directory on disk, started by this script and stopped by its PID; `--before-commit`
runs a worktree of that commit (made with `git worktree add` if missing) with the same
interpreter and PYTHONPATH pointing at it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import websockets

from pigeonhole.archive.client import ArchiveClient
from pigeonhole.archive.envelopes import seal

ROOT = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024
ONE_64 = [f"2001:db8:77:1::{n:x}" for n in (1, 2, 3, 0xBEEF, 0xFFFF)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `pigeonhole serve` of `src` (None: this checkout), stopped by its PID."""

    def __init__(self, src: Path | None) -> None:
        self.port = free_port()
        self.data = Path(tempfile.mkdtemp(prefix="pigeonhole-probe-", dir="/var/tmp"))
        env = {**os.environ, "PIGEONHOLE_SERVE_ADMIN_PORT": "0"}
        if src is not None:
            env["PYTHONPATH"] = str(src)
        argv = [sys.executable, "-m", "pigeonhole", "serve", "--port", str(self.port)]
        argv += ["--data-dir", str(self.data / "data"), "--log-level", "WARNING"]
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.data, ignore_errors=True)


async def allocations(url: str, address: str, most: int) -> int:
    got = 0
    for _ in range(most):
        async with websockets.connect(url, additional_headers={"X-Real-IP": address}) as ws:
            await ws.recv()  # welcome
            await ws.send(json.dumps({"type": "bind", "appid": "probe", "side": "s1"}))
            await ws.send(json.dumps({"type": "allocate"}))
            while (reply := json.loads(await ws.recv()))["type"] == "ack":
                pass
        if reply["type"] != "allocated":
            break
        got += 1
    return got


async def archive_flood(url: str, seconds: float) -> tuple[float, float, str]:
    """(MiB archived, seconds, why it stopped) for one address posting as fast as it seals."""
    stored = refused_in_row = 0
    why = "time"
    start = time.monotonic()
    headers = {"X-Real-IP": "198.51.100.7"}
    async with ArchiveClient.connect(url, headers=headers) as client:
        while time.monotonic() - start < seconds:
            now = int(time.time())
            data = secrets.token_bytes(64 * 1024)
            env = seal(expiry=now + 2, ttl=2, topic=b"prob", data=data, target_pow=0.001)
            refused = await client.post([env])
            if refused:
                refused_in_row += 1
                why = refused[0].description
                if refused_in_row >= 5:
                    break
            else:
                refused_in_row = 0
                stored += len(env.rlp)
    return stored / MiB, time.monotonic() - start, why


async def probe(label: str, src: Path | None, seconds: float) -> None:
    server = Serve(src)
    try:
        url = f"ws://127.0.0.1:{server.port}"
        v6 = sum([await allocations(f"{url}/v1", a, 200) for a in ONE_64])
        v4 = await allocations(f"{url}/v1", "198.51.100.9", 200)
        mib, took, why = await archive_flood(f"{url}/whisper/v6", seconds)
    finally:
        server.stop()
    print(f"| {label} | {v6} | {v4} | {mib:.1f} MiB in {took:.0f} s | {why} |", flush=True)


def worktree(commit: str, where: Path) -> Path:
    if not where.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", str(where), commit], check=True)
    return where / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before-commit", default=None)
    parser.add_argument("--before-dir", type=Path, default=Path("/var/tmp/pigeonhole-before"))
    parser.add_argument("--archive-seconds", type=float, default=60.0)
    args = parser.parse_args()
    print("| server | nameplates, five addresses of one /64 | nameplates, one IPv4 address"
          " | archived from one address | stopped by |")
    print("|---|---|---|---|---|")
    if args.before_commit:
        src = worktree(args.before_commit, args.before_dir)
        asyncio.run(probe(f"before ({args.before_commit})", src, args.archive_seconds))
    asyncio.run(probe("this checkout", None, args.archive_seconds))


if __name__ == "__main__":
    main()
