"""`python -m pigeonhole.transit`: the relay alone, as the interop tests run it.

It must say where it listens (port 0 works), relay TCP and WebSocket pairs, write each
usage record as a JSON line with the reference's `--log-fd` keys, and on SIGTERM stop
accepting but let an active pair finish, then exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.transit.transit_support import TcpClient, WsClient, line, listening, side, token

LISTENING_RE = re.compile(rb"listening on 127\.0\.0\.1:(\d+) \(WebSocket 127\.0\.0\.1:(\d+)\)")
PAYLOAD = b"x" * 100_000


class Runner:
    def __init__(self, proc: asyncio.subprocess.Process, port: int, ws_port: int) -> None:
        self.proc, self.port, self.ws_url = proc, port, f"ws://127.0.0.1:{ws_port}/transit"

    async def record(self, timeout: float = 10.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        return dict(json.loads(await asyncio.wait_for(self.proc.stdout.readline(), timeout)))


@pytest.fixture
async def runner() -> AsyncIterator[Runner]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pigeonhole.transit", "--port", "0", "--ws-port", "0",
        "--usage-json", "--drain-timeout", "20",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        first = await asyncio.wait_for(proc.stderr.readline(), 30)
        found = LISTENING_RE.search(first)
        assert found, first
        yield Runner(proc, int(found.group(1)), int(found.group(2)))
    finally:
        if proc.returncode is None:
            proc.kill()
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()


async def pair(port: int, ws_url: str | None = None) -> tuple[TcpClient, TcpClient | WsClient]:
    tok = token()
    first = await TcpClient.open(port)
    second = await WsClient.open(ws_url) if ws_url else await TcpClient.open(port)
    await first.send(line(tok, side()))
    await second.send(line(tok, side()))
    assert await first.read_exactly(3) == b"ok\n"
    assert await second.read_exactly(3) == b"ok\n"
    return first, second


async def test_relays_a_pair_and_writes_its_usage_line(runner: Runner) -> None:
    for ws_url in (None, runner.ws_url):
        sender, receiver = await pair(runner.port, ws_url)
        await sender.send(PAYLOAD)
        await sender.close()
        assert await receiver.read_all() == PAYLOAD
        await receiver.close()
        record = await runner.record()
        assert set(record) == {"started", "total_time", "waiting_time", "total_bytes", "mood"}
        assert (record["mood"], record["total_bytes"]) == ("happy", len(PAYLOAD))


async def test_sigterm_refuses_new_connections_and_drains_the_active_pair(
    runner: Runner,
) -> None:
    sender, receiver = await pair(runner.port)
    runner.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while listening(runner.port):  # it stops accepting at once
        assert time.monotonic() < deadline, "the relay still listens after SIGTERM"
        await asyncio.sleep(0.02)
    with pytest.raises(OSError):
        await TcpClient.open(runner.port)
    await sender.send(PAYLOAD)
    await sender.close()
    assert await receiver.read_all() == PAYLOAD
    await receiver.close()
    assert (await runner.record())["mood"] == "happy"
    assert await asyncio.wait_for(runner.proc.wait(), 15) == 0
