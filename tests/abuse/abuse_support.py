"""What the flood tests share: a real server process, and real `wormhole` transfers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.support.process import ServeProcess, free_port

BIN = Path(sys.executable).parent
#: each running server's admin port (/metrics, /status.json), by its WebSocket URL
ADMIN_PORTS: dict[str, int] = {}


@contextlib.contextmanager
def running_server(data_dir: Path, *options: str) -> Iterator[tuple[str, int]]:
    """`pigeonhole serve` on a free loopback port: (WebSocket URL, PID); stopped by PID."""
    admin_port = free_port()
    server = ServeProcess(
        data_dir.with_suffix(".log"),
        "--admin-port",
        str(admin_port),
        "--data-dir",
        str(data_dir),
        "--log-level",
        "WARNING",
        *options,
    )
    server.start()
    ADMIN_PORTS[server.url] = admin_port
    try:
        yield server.url, server.pid
    finally:
        del ADMIN_PORTS[server.url]
        server.stop(timeout=10)
    assert server.returncode == 0, "the server must survive the floods and stop cleanly"


def metrics_url(url: str) -> str:
    """/metrics of the server at WebSocket `url` (on its admin listener)."""
    return f"http://127.0.0.1:{ADMIN_PORTS[url]}/metrics"


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


async def transfer(url: str, text: str) -> tuple[int, int, str]:
    """One `wormhole send --text` / `receive` pair with a fresh code."""
    code = f"{random.randint(1000, 8999)}-{secrets.token_hex(3)}-{secrets.token_hex(3)}"
    env = {**os.environ, "WORMHOLE_RELAY_URL": url}
    wormhole = str(BIN / "wormhole")
    sender = await asyncio.create_subprocess_exec(
        "timeout",
        "-k",
        "5",
        "60",
        wormhole,
        "send",
        "--no-qr",
        "--hide-progress",
        "--code",
        code,
        "--text",
        text,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert sender.stderr is not None
    # the sender claims first: it prints its code once connected, with the code set
    while b"Wormhole code is" not in (said := await asyncio.wait_for(sender.stderr.readline(), 60)):
        assert said, "the sender exited without printing its code"
    receiver = await asyncio.create_subprocess_exec(
        "timeout",
        "-k",
        "5",
        "60",
        wormhole,
        "receive",
        "--hide-progress",
        code,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await receiver.communicate()
    await sender.communicate()  # the rest of its output, until it exits
    return await sender.wait(), receiver.returncode or 0, out.decode().strip()
