"""kill -9 survival: every envelope the server acknowledged is on disk afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

import pigeonhole
from pigeonhole.archive.bloom import FULL_BLOOM
from pigeonhole.archive.client import ArchiveClient, ArchiveClientError
from pigeonhole.archive.envelopes import Envelope
from pigeonhole.archive.query import KeyRange, key_hash
from pigeonhole.archive.requests import RequestPayload
from pigeonhole.archive.store import ArchiveStore
from tests.support.process import Service

APP = Path(__file__).with_name("archive_app.py")
SRC = Path(pigeonhole.__file__).resolve().parents[1]
#: posters run until the server dies; each stops after this many posts regardless
MAX_POSTS = 2000
STARTUP_TIMEOUT = 20.0


def _port_line(app: Service) -> int | None:
    """The port archive_app.py prints on its stdout once it listens."""
    printed = re.search(r"^(\d+)\n", app.output(), re.MULTILINE)
    return int(printed[1]) if printed else None


@contextlib.asynccontextmanager
async def _server(data_dir: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    """Start archive_app.py in a child process; yield it and its URL once it listens."""
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    app = Service(
        [sys.executable, str(APP), str(data_dir)],
        data_dir.with_suffix(".log"),
        ready=lambda: _port_line(app) is not None,
        env=env,
        name="the archive app",
    )
    try:
        await asyncio.to_thread(app.start, STARTUP_TIMEOUT)
        assert app.proc is not None
        yield app.proc, f"ws://127.0.0.1:{_port_line(app)}/whisper/v6"
    finally:
        await asyncio.to_thread(app.stop, signal.SIGKILL)


async def _poster(url: str, worker: int, acknowledged: list[bytes], started: asyncio.Event) -> None:
    """Post one envelope at a time; record each hash once the server acknowledged it."""
    now = int(time.time())
    with contextlib.suppress(ArchiveClientError, aiohttp.ClientError, OSError):
        async with ArchiveClient.connect(url) as client:
            for n in range(MAX_POSTS):
                envelope = Envelope(
                    expiry=now + 3600,
                    ttl=3600,
                    topic=b"\x00\x00\x00\x01",
                    data=f"{worker}:{n}".encode(),
                    nonce=0,
                )
                refused = await client.post([envelope])
                assert refused == []
                acknowledged.append(envelope.hash)
                if len(acknowledged) >= 200:
                    started.set()


@pytest.mark.timeout(60)
async def test_acknowledged_envelopes_survive_kill_9(tmp_path: Path, sym_key: bytes) -> None:
    """Post from 4 connections, SIGKILL the server mid-stream, reopen: nothing acked is lost."""
    data_dir = tmp_path / "data"
    acknowledged: list[bytes] = []
    started = asyncio.Event()
    async with _server(data_dir) as (proc, url):
        posters = [asyncio.create_task(_poster(url, w, acknowledged, started)) for w in range(4)]
        await asyncio.wait_for(started.wait(), 30)
        os.kill(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        assert proc.returncode == -signal.SIGKILL
        await asyncio.gather(*posters)
    assert len(acknowledged) >= 200

    store = ArchiveStore(data_dir / "archive.sqlite")
    store.open()
    try:
        stored = {key_hash(key) for key, _ in store.scan(KeyRange(b"", None, None))}
    finally:
        store.close()
    assert set(acknowledged) <= stored

    async with _server(data_dir) as (_, url), ArchiveClient.connect(url) as client:
        served: set[bytes] = set()
        payload = RequestPayload(0, 0, FULL_BLOOM, 1000)
        async for reply in client.request_all(payload, sym_key):
            served.update(e.hash for e in reply.envelopes)
    assert set(acknowledged) <= served
