"""Bounded floods against a live server while real `wormhole` transfers keep succeeding.

Everything runs on 127.0.0.1. The attacker's connections come through the trusted
loopback "proxy" with X-Real-IP set, as they would behind nginx, so the per-address
limit applies to the attacker and not to the real clients.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from tests.abuse.abuse_support import get, metrics_url, running_server, transfer

pytestmark = pytest.mark.interop

ATTACKER = {"X-Real-IP": "203.0.113.66"}
OTHER_ATTACKER = {"X-Real-IP": "203.0.113.99"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with running_server(tmp_path / "data", "--send-timeout", "3") as (url, _pid):
        yield url


async def hold_connections(url: str, n: int, outcomes: Counter[str]) -> list[object]:
    held = []
    for _ in range(n):
        try:
            held.append(await websockets.connect(url, additional_headers=ATTACKER))
            outcomes["accepted"] += 1
        except websockets.InvalidStatus as err:
            outcomes[f"http {err.response.status_code}"] += 1
    return held


async def oversize(url: str, outcomes: Counter[str]) -> None:
    async with websockets.connect(url, additional_headers=OTHER_ATTACKER, max_size=None) as ws:
        try:
            await ws.send(json.dumps({"type": "ping", "ping": "x" * (5 * 1024 * 1024)}))
            while True:
                await ws.recv()
        except websockets.ConnectionClosed as err:
            outcomes[f"close {err.rcvd.code if err.rcvd else None}"] += 1


async def storm(url: str, outcomes: Counter[str]) -> None:
    async with websockets.connect(url, additional_headers=OTHER_ATTACKER) as ws:
        try:
            for i in range(1000):
                await ws.send(json.dumps({"type": "ping", "ping": i}))
            while True:
                await ws.recv()
        except websockets.ConnectionClosed as err:
            outcomes[f"close {err.rcvd.code if err.rcvd else None}"] += 1


def _masked_text_frame(payload: bytes) -> bytes:
    """A client->server WebSocket text frame (RFC 6455 §5.2: clients mask)."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        header = bytes([0x81, 0x80 | n])
    elif n < 65536:
        header = bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        header = bytes([0x81, 0x80 | 127]) + n.to_bytes(8, "big")
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return header + mask + masked


async def slow_reader(url: str, outcomes: Counter[str], readers: int) -> None:
    """A raw client with a tiny receive buffer that asks for big pongs and never reads; it
    holds on until the server has dropped all `readers` of them (bounded)."""
    port = int(url.split(":")[2].split("/")[0])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /v1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\nX-Real-IP: {OTHER_ATTACKER['X-Real-IP']}\r\n\r\n"
    )
    await loop.sock_sendall(sock, request.encode())
    big = "y" * 50_000
    try:
        # pings within the command burst: only not reading can get this client dropped
        for i in range(90):
            frame = json.dumps({"type": "ping", "ping": big, "id": i}).encode()
            await loop.sock_sendall(sock, _masked_text_frame(frame))
    except OSError:
        outcomes["slow reader dropped early"] += 1
    await slow_readers_dropped(url, readers)  # hold the connection, never reading
    sock.close()


async def slow_readers_dropped(url: str, expected: int) -> int:
    """The server's own count of slow readers it dropped (they cannot see a close)."""
    pattern = 'pigeonhole_limit_hits_total{limit="slow reader"}'
    found = 0
    for _ in range(150):
        text = await asyncio.to_thread(get, metrics_url(url))
        if pattern in text:
            found = int(float(text.split(pattern)[1].split()[0]))
            if found >= expected:
                break
        await asyncio.sleep(0.1)
    return found


async def test_floods_do_not_stop_real_transfers(server: str) -> None:
    """Connection, oversize, storm and slow-reader floods; real transfers all succeed."""
    outcomes: Counter[str] = Counter()
    texts = [f"hello-{i}-{secrets.token_hex(4)}" for i in range(3)] + ["z" * 100_000]
    held = await hold_connections(server, 130, outcomes)
    floods = [oversize(server, outcomes) for _ in range(3)]
    floods += [storm(server, outcomes) for _ in range(5)]
    floods += [slow_reader(server, outcomes, 2) for _ in range(2)]
    results = await asyncio.gather(
        *(transfer(server, t) for t in texts), *floods, return_exceptions=True
    )
    for ws in held:
        await ws.close()  # type: ignore[attr-defined]
    transfers = results[: len(texts)]
    for text, result in zip(texts, transfers, strict=True):
        assert not isinstance(result, BaseException), result
        send_rc, receive_rc, received = result
        assert (send_rc, receive_rc) == (0, 0)
        assert received == text
    for result in results[len(texts) :]:
        assert not isinstance(result, BaseException), result
    assert outcomes["accepted"] == 100 and outcomes["http 429"] == 30, outcomes
    # oversize frames are closed with 1009, storms with 1008, slow readers are dropped
    assert outcomes["close 1009"] == 3, outcomes
    assert outcomes["close 1008"] == 5, outcomes
    assert await slow_readers_dropped(server, 2) == 2
