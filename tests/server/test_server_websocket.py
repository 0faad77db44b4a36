"""The WebSocket layer of the mailbox endpoint, byte by byte over a raw TCP socket.

The frames here are written and read by hand (RFC 6455), independent of any WebSocket
library, to pin down what the server does with fragments, bad UTF-8, control frames, a
handshake split across writes or followed at once by a frame, and silent clients.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import struct
from typing import Any

import pytest

from pigeonhole.server.app import MailboxServer
from tests.server.status_support import until
from tests.support.server import http_get

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CONT, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


def client_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A masked client frame."""
    mask = os.urandom(4)
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def handshake(path: str = "/v1") -> tuple[bytes, bytes]:
    key = base64.b64encode(os.urandom(16))
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key.decode()}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    return request, accept


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(
        cls, srv: MailboxServer, after_handshake: bytes = b"", split: bool = False
    ) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        request, accept = handshake()
        if split:  # one byte per write: the head arrives in many pieces
            for i in range(len(request)):
                writer.write(request[i : i + 1])
                await writer.drain()
                await asyncio.sleep(0)
            writer.write(after_handshake)
        else:
            writer.write(request + after_handshake)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert b"Sec-WebSocket-Accept: " + accept in head
        client = cls(reader, writer)
        welcome = await client.recv_json()
        assert welcome["type"] == "welcome"
        return client

    def send(self, opcode: int, payload: bytes, fin: bool = True) -> None:
        self.writer.write(client_frame(opcode, payload, fin))

    def send_json(self, **msg: Any) -> None:
        self.send(TEXT, json.dumps(msg).encode())

    async def recv(self) -> tuple[int, bytes]:
        """(opcode, payload) of the next server frame; server frames are never masked."""
        first, second = await asyncio.wait_for(self.reader.readexactly(2), 5)
        assert second & 0x80 == 0, "server frames must not be masked"
        n = second & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
        return first & 0x0F, await self.reader.readexactly(n)

    async def recv_json(self) -> dict[str, Any]:
        opcode, payload = await self.recv()
        assert opcode == TEXT, (opcode, payload)
        return json.loads(payload)  # type: ignore[no-any-return]

    async def closed(self, timeout: float = 5.0) -> bool:
        """Whether the server closes the TCP connection within `timeout` s (what it sends
        until then is read and dropped)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
        except ConnectionError:
            return True
        except TimeoutError:
            return False
        return True


async def pong_for(client: RawClient, ping: object) -> dict[str, Any]:
    while True:
        frame = await client.recv_json()
        if frame["type"] == "pong":
            assert frame["pong"] == ping
            return frame


async def test_fragmented_message_is_reassembled(server: MailboxServer) -> None:
    """A text message in three fragments is served as one message."""
    client = await RawClient.open(server)
    data = json.dumps({"type": "ping", "ping": 77, "id": "f"}).encode()
    client.send(TEXT, data[:5], fin=False)
    client.send(CONT, data[5:12], fin=False)
    client.send(PING, b"between")  # control frames may come between fragments
    client.send(CONT, data[12:])
    assert await client.recv() == (PONG, b"between")
    assert (await client.recv_json())["type"] == "ack"
    await pong_for(client, 77)


async def test_binary_frame_with_json_is_served(server: MailboxServer) -> None:
    client = await RawClient.open(server)
    client.send(BINARY, json.dumps({"type": "ping", "ping": 5}).encode())
    await pong_for(client, 5)


async def test_invalid_utf8_text_fails_with_1007(server: MailboxServer) -> None:
    """RFC 6455 §8.1: a text message that is not UTF-8 closes the connection with 1007."""
    client = await RawClient.open(server)
    client.send(TEXT, b'{"type": "ping", "ping": "\xff"}')
    opcode, payload = await client.recv()
    assert opcode == CLOSE and struct.unpack("!H", payload[:2])[0] == 1007
    assert await client.closed()


async def test_frame_right_after_the_handshake_is_served(server: MailboxServer) -> None:
    """Bytes sent with the handshake, before the 101 arrives, are not lost."""
    first = client_frame(TEXT, json.dumps({"type": "ping", "ping": 1}).encode())
    client = await RawClient.open(server, after_handshake=first)
    await pong_for(client, 1)


async def test_handshake_split_across_writes(server: MailboxServer) -> None:
    client = await RawClient.open(server, split=True)
    client.send_json(type="ping", ping=2)
    await pong_for(client, 2)


async def test_client_close_is_echoed_and_connection_released(server: MailboxServer) -> None:
    client = await RawClient.open(server)
    assert len(server.ctx.clients) == 1
    client.send(CLOSE, struct.pack("!H", 1000) + b"bye")
    opcode, payload = await client.recv()
    assert opcode == CLOSE and struct.unpack("!H", payload[:2])[0] == 1000
    assert await client.closed()
    for _ in range(50):
        if not server.ctx.clients:
            break
        await asyncio.sleep(0.02)
    assert not server.ctx.clients


async def test_oversize_frame_is_refused_before_it_is_read(make_server: Any) -> None:
    """A frame header announcing more than --max-frame-bytes is closed with 1009 at once."""
    async with make_server(max_frame_bytes=1000) as srv:
        client = await RawClient.open(srv)
        mask = os.urandom(4)
        # only the header and 10 bytes of a 1 MB frame: the server must not wait for the rest
        client.writer.write(bytes([0x81, 0x80 | 127]) + struct.pack("!Q", 10**6) + mask + b"x" * 10)
        opcode, payload = await client.recv()
        assert opcode == CLOSE and struct.unpack("!H", payload[:2])[0] == 1009
        assert await client.closed()


async def test_silent_client_is_pinged_then_dropped(server: MailboxServer) -> None:
    """One quiet sweep: nothing; the next: a ping; the next, still silent: dropped."""
    client = await RawClient.open(server)
    server.ctx.clients.heartbeat()  # the handshake counted as heard
    server.ctx.clients.heartbeat()
    assert (await client.recv())[0] == PING
    server.ctx.clients.heartbeat()
    assert await client.closed()


async def test_client_answering_pings_is_kept(server: MailboxServer) -> None:
    client = await RawClient.open(server)
    for _ in range(3):
        server.ctx.clients.heartbeat()
        server.ctx.clients.heartbeat()
        opcode, payload = await client.recv()
        assert opcode == PING
        client.send(PONG, payload)
        # the next sweep comes once the server has read the pong (heard since the last)
        await until(lambda: all(conn.socket._heard for conn in server.ctx.clients))
    client.send_json(type="ping", ping=9)
    await pong_for(client, 9)
    assert len(server.ctx.clients) == 1


@pytest.mark.parametrize("path", ["/v1", "/v1?x=1"])
async def test_plain_get_of_the_mailbox_path_is_answered_as_http(
    server: MailboxServer, path: str
) -> None:
    status, _, body = await http_get(f"http://127.0.0.1:{server.port}{path}")
    assert status == 200 and "connect with a WebSocket client" in body


async def test_bad_handshake_is_refused_with_400(server: MailboxServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    request = handshake()[0].replace(b"Sec-WebSocket-Version: 13", b"Sec-WebSocket-Version: 8")
    writer.write(request)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 426") or head.startswith(b"HTTP/1.1 400"), head
    assert not server.ctx.clients
    writer.close()


async def test_connection_that_never_finishes_its_head_is_dropped(make_server: Any) -> None:
    """A client that sends part of a request head and stops is cut off after the timeout."""
    async with make_server(handshake_timeout=0.3) as srv:
        # a client that completes its head in time is served normally
        client = await RawClient.open(srv)
        client.send_json(type="ping", ping=4)
        await pong_for(client, 4)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(handshake()[0][:30])
        await writer.drain()
        # the server closes it (EOF) within the timeout, well before our 5 s wait ends
        assert await asyncio.wait_for(reader.read(), 5) == b""
        # the served client connected first, so its timeout is past too: it is not cut
        client.send_json(type="ping", ping=5)
        await pong_for(client, 5)
        client.writer.close()
