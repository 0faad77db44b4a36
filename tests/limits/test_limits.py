"""Each limit reaches the client as a clear error or close code, never as a crash."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest
import websockets

from pigeonhole.protocol.limits import Limits
from tests.limits.limits_support import StartServer, call, connect


async def bound(url: str, side: str, **kw: object) -> object:
    ws = await connect(url, **kw)
    await ws.send(json.dumps({"type": "bind", "appid": "app", "side": side}))
    return ws


async def test_oversize_frame_is_closed_with_1009(start_server: StartServer) -> None:
    """A frame over --max-frame-bytes closes the connection with 1009 (message too big)."""
    async with start_server(max_frame_bytes=64 * 1024) as srv:
        ws = await connect(srv.url, max_size=None)
        await ws.send(json.dumps({"type": "ping", "ping": "x" * 100_000}))
        with pytest.raises(websockets.ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009
        # and the server is fine
        other = await connect(srv.url)
        assert (await call(other, type="ping", ping=1))["pong"] == 1


async def test_body_too_large_is_an_error_and_connection_lives(start_server: StartServer) -> None:
    """An `add` body over the limit is refused with an error; the connection stays usable."""
    async with start_server(limits=Limits(max_body_bytes=1000)) as srv:
        ws = await bound(srv.url, "a")
        await ws.send(json.dumps({"type": "open", "mailbox": "m"}))
        reply = await call(ws, type="add", phase="p", body="ab" * 1001)
        assert reply["type"] == "error"
        assert reply["error"] == "message body too large (1001 > 1000 bytes)"
        ok = await call(ws, type="add", phase="p", body="ab" * 1000)
        assert ok["type"] == "message" and ok["body"] == "ab" * 1000


async def test_mailbox_message_and_byte_limits(start_server: StartServer) -> None:
    """A mailbox refuses messages past its count or byte limit: `mailbox is full`."""
    limits = Limits(max_mailbox_messages=3, max_mailbox_bytes=10)
    async with start_server(limits=limits) as srv:
        ws = await bound(srv.url, "a")
        await ws.send(json.dumps({"type": "open", "mailbox": "m"}))
        for _ in range(3):
            assert (await call(ws, type="add", phase="p", body="00"))["type"] == "message"
        assert (await call(ws, type="add", phase="p", body="00"))["error"] == "mailbox is full"
        other = await bound(srv.url, "b")
        await other.send(json.dumps({"type": "open", "mailbox": "n"}))
        reply = await call(other, type="add", phase="p", body="00" * 11)
        assert reply["error"] == "mailbox is full"


async def test_creations_per_connection_are_bounded(start_server: StartServer) -> None:
    """A connection may create only so many nameplates and mailboxes."""
    async with start_server(limits=Limits(max_creations=2)) as srv:
        ws = await bound(srv.url, "a")
        assert (await call(ws, type="allocate"))["type"] == "allocated"  # nameplate + mailbox
        reply = await call(ws, type="claim", nameplate="77")
        assert reply["error"] == "too many nameplates or mailboxes created by this connection"


async def test_command_storm_gets_error_then_close_1008(start_server: StartServer) -> None:
    """Commands beyond the burst and rate get an error and a 1008 close."""
    limits = Limits(commands_per_second=1.0, command_burst=20)
    async with start_server(limits=limits) as srv:
        ws = await connect(srv.url)
        for i in range(40):
            await ws.send(json.dumps({"type": "ping", "ping": i}))
        errors = []
        with pytest.raises(websockets.ConnectionClosed) as info:
            while True:
                msg = json.loads(await ws.recv())
                if msg["type"] == "error":
                    errors.append(msg["error"])
        assert errors == ["too many commands: slow down"]
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008
        assert srv.ctx.metrics.limits["too many commands: slow down"] == 1


async def test_connections_per_address_refused_with_429(start_server: StartServer) -> None:
    """Past the per-address limit the handshake fails with HTTP 429; others are unaffected."""
    async with start_server(max_connections_per_address=3) as srv:
        held = [await connect(srv.url) for _ in range(3)]
        with pytest.raises(websockets.InvalidStatus) as info:
            await connect(srv.url)
        assert info.value.response.status_code == 429
        assert b"too many connections" in info.value.response.body
        # a different client address (told by the trusted loopback proxy) still gets in
        other = await connect(srv.url, additional_headers={"X-Real-IP": "192.0.2.7"})
        assert (await call(other, type="ping", ping=1))["pong"] == 1
        assert srv.ctx.clients.by_address["127.0.0.1"] == 3
        await held[0].close()
        deadline = time.monotonic() + 5
        while srv.ctx.clients.by_address["127.0.0.1"] > 2:  # the server has let it go
            assert time.monotonic() < deadline, srv.ctx.clients.by_address
            await asyncio.sleep(0.01)
        again = await connect(srv.url)
        assert (await call(again, type="ping", ping=2))["pong"] == 2


async def test_total_connections_refused_with_503(start_server: StartServer) -> None:
    """Past the total connection limit the handshake fails with HTTP 503."""
    async with start_server(max_connections=2) as srv:
        _held = [await connect(srv.url) for _ in range(2)]
        with pytest.raises(websockets.InvalidStatus) as info:
            await connect(srv.url)
        assert info.value.response.status_code == 503


@pytest.mark.parametrize(
    ("buffered", "timeout", "pings"),
    [(1024 * 1024, 30.0, 200), (64 * 1024 * 1024, 1.0, 40)],
    ids=["too-many-unread-bytes", "behind-too-long"],
)
async def test_slow_reader_is_closed_and_others_keep_going(
    start_server: StartServer, buffered: int, timeout: float, pings: int
) -> None:
    """A client that stops reading is closed; another client's exchange goes on meanwhile.

    Either limit drops it: too many bytes it has not read, or being behind for too long.
    """
    limits = Limits(commands_per_second=1000, command_burst=1000)
    async with start_server(
        limits=limits, max_buffered_bytes=buffered, send_timeout=timeout
    ) as srv:
        # max_queue=1: the client library stops reading the socket once one frame waits
        slow = await connect(srv.url, max_queue=1, max_size=None)
        big = "x" * 200_000
        with contextlib.suppress(websockets.ConnectionClosed, ConnectionError):
            for i in range(pings):  # 8 MB of pongs: far beyond socket buffers
                await slow.send(json.dumps({"type": "ping", "ping": big, "id": i}))
        fast = await bound(srv.url, "f")
        await fast.send(json.dumps({"type": "open", "mailbox": "m"}))
        for i in range(20):
            reply = await call(fast, type="add", phase=str(i), body="00")
            assert reply["type"] == "message" and reply["phase"] == str(i)
        for _ in range(100):
            if srv.ctx.metrics.limits["slow reader"]:
                break
            await asyncio.sleep(0.1)
        assert srv.ctx.metrics.limits["slow reader"] == 1
        assert len(srv.ctx.clients) == 1
