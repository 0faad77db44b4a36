"""kill -9 survival: every envelope the server acknowledged is on disk afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import os
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

APP = Path(__file__).with_name("archive_app.py")
SRC = Path(pigeonhole.__file__).resolve().parents[1]
#: posters run until the server dies; each stops after this many posts regardless
MAX_POSTS = 2000
STARTUP_TIMEOUT = 20.0


@contextlib.asynccontextmanager
async def _server(data_dir: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], str]]:
    """Start archive_app.py in a child process; yield it and its URL once it listens."""
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = await asyncio.to_thread(
        subprocess.Popen, [sys.executable, str(APP), str(data_dir)],
        stdout=subprocess.PIPE, env=env,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), STARTUP_TIMEOUT)
        assert line, "the archive app exited before listening"
        yield proc, f"ws://127.0.0.1:{int(line)}/whisper/v6"
    finally:
        if proc.poll() is None:
            proc.kill()
        await asyncio.to_thread(proc.wait)
        if proc.stdout is not None:
            proc.stdout.close()


async def _poster(url: str, worker: int, acknowledged: list[bytes], started: asyncio.Event) -> None:
    """Post one envelope at a time; record each hash once the server acknowledged it."""
    now = int(time.time())
    with contextlib.suppress(ArchiveClientError, aiohttp.ClientError, OSError):
        async with ArchiveClient.connect(url) as client:
            for n in range(MAX_POSTS):
                envelope = Envelope(expiry=now + 3600, ttl=3600, topic=b"\x00\x00\x00\x01",
                                    data=f"{worker}:{n}".encode(), nonce=0)
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

