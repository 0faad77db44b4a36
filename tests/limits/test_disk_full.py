"""A real disk running out: low free space, then no space at all, then space back.

The data directory is a small tmpfs of its own (mounting needs root; CI runs as root),
filled by a filler file. Below the free-space watermark only small bodies are stored and
/health answers 503; a full disk makes a commit fail: its replies are held (no
connection closed), new writes are refused, /health answers 503. Deleting the filler
lets the retried commit succeed: the held replies go out, writes are taken again, and a
restarted server has what was confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from pigeonhole.config import ServerConfig
from pigeonhole.server.app import MailboxServer
from tests.support.server import APPID, Client, Frame, base_config, http_get, open_client
from tests.support.tmpfs import free_bytes, small_tmpfs

MiB = 1024 * 1024
DISK_SIZE = 48 * MiB
WATERMARK = 12 * MiB
#: free bytes left by the filler in the low-space phase: below the watermark, not zero
LOW_FREE = 6 * MiB
#: bodies as the client sends them: hex, two characters a byte
SMALL = "5a" * 1000  # 1000 bytes, far under Limits.low_disk_max_body_bytes (16 KiB)
BIG = "ab" * (100 * 1024)  # 100 KiB
#: the longest any state change may take to show (disk checks every 0.1 s; a failed
#: commit is retried after at most 2 s)
SETTLE = 10.0

DISK_LOW = "server is low on disk space"
STORAGE_DOWN = "server storage is failing: try again later"


# -- the disk ------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 48 MiB tmpfs, unmounted afterwards (skipped where it cannot be mounted)."""
    with small_tmpfs(tmp_path / "disk", DISK_SIZE) as mount_point:
        yield mount_point


def fill(filler: Path, leave: int) -> int:
    """Append to `filler` until `leave` bytes are free (0: until ENOSPC); the free bytes."""
    disk = filler.parent
    chunk = b"\xa5" * MiB
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while (free := free_bytes(disk)) > leave:
            try:
                os.write(fd, chunk[: min(MiB, free - leave)])
            except OSError as err:
                if err.errno != errno.ENOSPC or leave:
                    raise
                break
    finally:
        os.close(fd)
    return free_bytes(disk)


# -- the server and its clients -----------------------------------------------------------


def config_on(data_dir: Path, **overrides: Any) -> ServerConfig:
    """The black-box tests' base_config, with the disk watch of this test."""
    return base_config(
        data_dir,
        commit_sync="process",
        disk_free_watermark=WATERMARK,
        disk_check_interval=0.1,
        # a stop with storage still failing gives up after this (a failed run stays short)
        shutdown_timeout=2.0,
        **overrides,
    )


@asynccontextmanager
async def clients_of(srv: MailboxServer) -> AsyncIterator[Callable[[str], Awaitable[Client]]]:
    """`await bound(side)`: a new client of `srv`, bound; all disconnected at the end."""
    opened: list[Client] = []

    async def bound(side: str) -> Client:
        client = await open_client(srv.url)
        opened.append(client)
        await client.bind(APPID, side)
        return client

    try:
        yield bound
    finally:
        for client in opened:
            with contextlib.suppress(Exception):
                await client.disconnect()


async def health(srv: MailboxServer) -> tuple[int, str]:
    status, _, body = await http_get(f"http://127.0.0.1:{srv.port}/health")
    return status, body


async def health_becomes(srv: MailboxServer, status: int, text: str) -> str:
    """Poll /health until it answers `status` with `text` in its body (bounded)."""
    deadline = time.monotonic() + SETTLE
    while True:
        got, body = await health(srv)
        if got == status and text in body:
            return body
        assert time.monotonic() < deadline, f"/health still {got} {body!r}, not {status} {text!r}"
        await asyncio.sleep(0.05)


async def metrics(srv: MailboxServer) -> dict[str, float]:
    """Every sample of /metrics, keyed by its name with labels."""
    status, _, body = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
    assert status == 200, body
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def limit_hits(samples: dict[str, float], prefix: str) -> float:
    """pigeonhole_limit_hits_total of the one limit whose label starts with `prefix`."""
    pattern = re.compile(r'pigeonhole_limit_hits_total\{limit="' + re.escape(prefix))
    hits = [value for name, value in samples.items() if pattern.match(name)]
    assert len(hits) == 1, samples
    return hits[0]


async def nothing_arrives(client: Client, seconds: float) -> None:
    """Assert no frame at all reaches `client` for `seconds` (recv is cancellation-safe)."""
    with pytest.raises(TimeoutError):
        frame = await asyncio.wait_for(client.ws.recv(), seconds)
        pytest.fail(f"a frame arrived while its commit was failing: {frame!r}")


async def frame_within(client: Client, seconds: float) -> Frame:
    frame = json.loads(await asyncio.wait_for(client.ws.recv(), seconds))
    assert isinstance(frame, dict), frame
    return frame


async def alive(client: Client) -> None:
    """The connection is open: a WebSocket ping (answered below the outbox) comes back."""
    assert client.ws.close_code is None
    pong = await client.ws.ping()
    await asyncio.wait_for(pong, 5.0)


def logged(caplog: pytest.LogCaptureFixture, start: str) -> int:
    return sum(
        1
        for r in caplog.records
        if r.name == "pigeonhole.server" and r.getMessage().startswith(start)
    )


# -- the test ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
async def test_low_then_full_disk_holds_replies_and_recovers(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pigeonhole")
    data_dir = small_disk / "data"
    filler = small_disk / "filler"
    config = config_on(data_dir)
    async with MailboxServer(config) as srv, clients_of(srv) as bound:
        try:
            status, body = await health(srv)
            assert (status, body) == (200, "ok\n")

            # 1. below the watermark: big bodies refused, a real exchange still works
            left = fill(filler, LOW_FREE)
            assert 2 * MiB < left <= LOW_FREE < WATERMARK
            reason = await health_becomes(srv, 503, "disk space low")
            assert f"watermark {WATERMARK}" in reason
            samples = await metrics(srv)
            assert samples["pigeonhole_disk_low"] == 1
            assert 0 < samples["pigeonhole_disk_free_bytes"] < WATERMARK
            assert samples["pigeonhole_storage_down"] == 0

            a, b = await bound("a"), await bound("b")
            mailbox = await a.claim("1")
            assert await b.claim("1") == mailbox
            assert await a.open(mailbox) == []
            assert await b.open(mailbox) == []
            refused = await a.call("add", phase="big", body=BIG)
            assert refused["type"] == "error", refused
            assert refused["error"].startswith(DISK_LOW), refused
            assert refused["orig"] == {"type": "add", "phase": "big", "body": BIG}
            assert await a.sync() == []  # still served, and nothing else came
            assert limit_hits(await metrics(srv), DISK_LOW) == 1

            await a.add("pake", SMALL)
            (seen,) = await b.sync()
            assert (seen["type"], seen["side"], seen["phase"]) == ("message", "a", "pake")
            await b.add("pake", SMALL[::-1])
            await b.add("version", SMALL)
            seen_by_a = await a.sync()
            assert [(f["side"], f["phase"], f["body"]) for f in seen_by_a] == [
                ("b", "pake", SMALL[::-1]),
                ("b", "version", SMALL),
            ]
            await a.release()
            await b.release()
            await a.close(mood="happy")
            await b.close(mood="happy")
            assert srv.ctx.metrics.storage_failures == 0

            # 2. no space at all: the commit fails, its reply is held, writes are refused
            c, d = await bound("c"), await bound("d")
            mailbox2 = await c.claim("2")
            assert await c.open(mailbox2) == []
            assert fill(filler, 0) == 0
            connections = len(srv.ctx.clients)
            await c.send("add", phase="held", body=SMALL, id="h1")
            reason = await health_becomes(srv, 503, "storage failing")
            assert "disk space low" not in reason  # the failing store is the reason given
            assert "database or disk is full" in reason  # SQLite's own words, via the helper
            await nothing_arrives(c, 0.5)  # neither the ack nor the echo: not stored yet
            await alive(c)
            reply = await d.call("claim", nameplate="3")
            assert reply["type"] == "error", reply
            assert reply["error"] == STORAGE_DOWN, reply
            assert reply["orig"] == {"type": "claim", "nameplate": "3"}
            assert await d.sync() == []  # refused, not dropped: d is still served
            samples = await metrics(srv)
            assert samples["pigeonhole_storage_down"] == 1
            assert samples["pigeonhole_disk_low"] == 1
            assert samples["pigeonhole_storage_failures_total"] >= 1
            assert limit_hits(samples, STORAGE_DOWN) == 1
            deadline = time.monotonic() + SETTLE
            while srv.ctx.metrics.storage_failures < 3:  # written again, and failing again
                assert time.monotonic() < deadline, srv.ctx.metrics.storage_failures
                await asyncio.sleep(0.05)
            await nothing_arrives(c, 0.2)
            await alive(c)
            assert len(srv.ctx.clients) == connections

            # 3. space back: the retried commit succeeds and the held replies go out
            filler.unlink()
            ack = await frame_within(c, SETTLE)
            assert (ack["type"], ack["id"]) == ("ack", "h1"), ack
            echo = await frame_within(c, SETTLE)
            assert (echo["type"], echo["side"], echo["phase"]) == ("message", "c", "held")
            assert echo["body"] == SMALL
            assert await health_becomes(srv, 200, "ok") == "ok\n"
            samples = await metrics(srv)
            assert samples["pigeonhole_storage_down"] == 0
            assert samples["pigeonhole_disk_low"] == 0
            assert samples["pigeonhole_disk_free_bytes"] > WATERMARK
            assert await d.claim("2") == mailbox2  # writes are taken again
            replayed = await d.open(mailbox2)
            assert [(f["side"], f["phase"], f["body"]) for f in replayed] == [("c", "held", SMALL)]
            await d.add("reply", BIG)  # a big body is fine again
            (seen,) = await c.sync()
            assert (seen["side"], seen["phase"], seen["body"]) == ("d", "reply", BIG)
            for client in (a, b, c, d):
                assert client.ws.close_code is None
            assert len(srv.ctx.clients) == connections
        finally:
            filler.unlink(missing_ok=True)

    assert logged(caplog, "disk space low") == 1
    assert logged(caplog, "disk space back") == 1
    assert logged(caplog, "storage failing") == 1
    assert logged(caplog, "storage recovered") == 1

    # what was confirmed is on disk: a restarted server has it
    async with MailboxServer(config) as again, clients_of(again) as bound:
        c = await bound("c")
        listed = await c.call("list")
        assert listed["type"] == "nameplates", listed
        assert listed["nameplates"] == [{"id": "2"}]  # "1" was released and closed
        replayed = await c.open(mailbox2)
        assert [(f["side"], f["phase"], f["body"]) for f in replayed] == [
            ("c", "held", SMALL),
            ("d", "reply", BIG),
        ]
