"""WebSocket transit at the frame level: frames split anywhere over reads, fragmented
messages, control frames between data frames, and protocol errors, from a raw socket
(the relay parses data frames itself; websockets' Protocol takes control frames)."""

from __future__ import annotations

import asyncio
import os
import random

import pytest
from websockets.frames import Close, CloseCode, Frame, Opcode
from websockets.protocol import Protocol, Side, State

from tests.transit.transit_support import Relay, TcpClient, line, side, token

UPGRADE = (
    b"GET /transit HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


class RawWs:
    """A WebSocket client writing frames byte by byte as a test wants them."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.parser = Protocol(Side.CLIENT, state=State.OPEN, max_size=None)

    @classmethod
    async def open(cls, relay: Relay) -> RawWs:
        port = int(relay.ws_url.rsplit(":", 1)[1].split("/")[0])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(UPGRADE)
        assert b" 101 " in await reader.readuntil(b"\r\n\r\n")
        return cls(reader, writer)

    async def write(self, wire: bytes, pieces: list[int] | None = None) -> None:
        """`wire` in pieces of the given sizes (one write, one drain each), or at once."""
        at = 0
        for size in pieces or [len(wire)]:
            self.writer.write(wire[at : at + size])
            await self.writer.drain()
            at += size
        assert at >= len(wire)

    async def frames(self, timeout: float = 10.0) -> list[Frame]:
        """Every frame from the relay until it closes the connection."""
        got: list[Frame] = []
        while True:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                return got
            self.parser.receive_data(data)
            got += self.parser.events_received()


def frame(opcode: Opcode, data: bytes, fin: bool = True) -> bytes:
    return Frame(opcode, data, fin).serialize(mask=True)  # a fresh random mask each


def close_code(frames: list[Frame]) -> int | None:
    closes = [f for f in frames if f.opcode is Opcode.CLOSE]
    return Close.parse(closes[0].data).code if closes else None


async def ws_and_tcp(relay: Relay) -> tuple[RawWs, TcpClient]:
    tok, ws = token(), await RawWs.open(relay)
    tcp = await relay.tcp()
    await tcp.send(line(tok, side()))
    hello = line(tok, side())
    await ws.write(frame(Opcode.BINARY, hello[:10]) + frame(Opcode.BINARY, hello[10:]))
    assert await tcp.read_exactly(3) == b"ok\n"
    return ws, tcp


async def test_frames_split_anywhere_fragments_and_a_ping_deliver_the_exact_stream(
    relay: Relay,
) -> None:
    rng = random.Random(27)
    ws, tcp = await ws_and_tcp(relay)
    ok = await asyncio.wait_for(ws.reader.readexactly(5), 10)  # the "ok\n" binary frame
    assert ok == b"\x82\x03ok\n"
    payload, wire = b"", b""
    for size in [1, 2, 3, 125, 126, 127, 65535, 65536, 70000, 5, 4096, 1, 0, 3000]:
        data = os.urandom(size)
        payload += data
        wire += frame(Opcode.BINARY, data)
    parts = [os.urandom(n) for n in (7, 0, 100_000, 1)]  # one message in four fragments
    wire += frame(Opcode.BINARY, parts[0], fin=False) + frame(Opcode.PING, b"still there")
    wire += frame(Opcode.CONT, parts[1], fin=False) + frame(Opcode.CONT, parts[2], fin=False)
    wire += frame(Opcode.CONT, parts[3])
    payload += b"".join(parts)
    wire += frame(Opcode.CLOSE, Close(CloseCode.NORMAL_CLOSURE, "").serialize())
    pieces = []
    while sum(pieces) < len(wire):
        pieces.append(rng.choice([1, 2, 3, 5, 13, 1000, 8191, 40_000]))
    await ws.write(wire, pieces)
    assert await tcp.read_all() == payload  # then EOF
    frames = await ws.frames()
    assert [f.data for f in frames if f.opcode is Opcode.PONG] == [b"still there"]
    assert close_code(frames) == CloseCode.NORMAL_CLOSURE


PROTOCOL_ERROR, TOO_BIG = CloseCode.PROTOCOL_ERROR, CloseCode.MESSAGE_TOO_BIG


@pytest.mark.parametrize(
    "bad, code, delivered",
    [
        (frame(Opcode.CONT, b"no message begun"), PROTOCOL_ERROR, b""),
        (frame(Opcode.BINARY, b"a", fin=False) + frame(Opcode.BINARY, b"b"), PROTOCOL_ERROR, b"a"),
        (bytes([0x80 | 0x40 | 0x2]) + frame(Opcode.BINARY, b"rsv1")[1:], PROTOCOL_ERROR, b""),
        (bytes([0x82, 0xFF]) + (5 << 20).to_bytes(8, "big") + b"mask", TOO_BIG, b""),
    ],
    ids=["continuation-first", "no-continuation", "reserved-bit", "frame-too-big"],
)
async def test_protocol_errors_close_the_websocket_and_end_the_partner(
    relay: Relay, bad: bytes, code: CloseCode, delivered: bytes
) -> None:
    ws, tcp = await ws_and_tcp(relay)
    await ws.write(frame(Opcode.BINARY, b"before") + bad)
    frames = await ws.frames()
    assert close_code(frames) == code
    # every byte of the frames before the error, then EOF
    assert await tcp.read_all() == b"before" + delivered
