"""Bytes through the relay: every TCP/WebSocket combination, EOF, many pairs at once."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest
from transit_support import Client, Relay, line, side, token

from pigeonhole.transit import Mood, TransitConfig

MIB = 1024 * 1024
KINDS = ["tcp", "ws"]


async def connect(relay: Relay, kind: str) -> Client:
    return await (relay.tcp() if kind == "tcp" else relay.ws())


async def pair(relay: Relay, sender: str, receiver: str) -> tuple[Client, Client]:
    tok = token()
    a, b = await connect(relay, sender), await connect(relay, receiver)
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert await a.read(5) == b"ok\n"
    assert await b.read(5) == b"ok\n"
    return a, b


async def send_and_close(client: Client, data: bytes, chunk: int = 64 * 1024) -> None:
    for start in range(0, len(data), chunk):
        await client.send(data[start : start + chunk])
    await client.close()


async def transfer(relay: Relay, sender: str, receiver: str, size: int) -> bytes:
    """`size` random bytes from a `sender` client to a `receiver` one; what arrived."""
    a, b = await pair(relay, sender, receiver)
    data = os.urandom(size)
    sending = asyncio.create_task(send_and_close(a, data))
    got = await b.read_all(60)
    await sending
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), (len(got), size)
    return got


@pytest.mark.parametrize("sender", KINDS)
@pytest.mark.parametrize("receiver", KINDS)
async def test_one_mib_and_eof_in_every_combination(sender: str, receiver: str) -> None:
    async with Relay(TransitConfig()) as relay:
        await transfer(relay, sender, receiver, MIB)
        await relay.settle()
        assert [r.result for r in relay.records] == [Mood.HAPPY]
        assert relay.records[0].total_bytes == MIB
        assert not relay.relay.hub.live


async def test_tcp_pairs_without_splice_move_the_same_bytes() -> None:
    async with Relay(TransitConfig(), splice=False) as relay:
        await transfer(relay, "tcp", "tcp", 4 * MIB)


@pytest.mark.parametrize("receiver", KINDS)
async def test_both_directions_at_once(relay: Relay, receiver: str) -> None:
    a, b = await pair(relay, "tcp", receiver)
    there, back = os.urandom(3 * MIB), os.urandom(2 * MIB)
    sends = [asyncio.create_task(c.send(d)) for c, d in ((a, there), (b, back))]
    got_back = await a.read_exactly(len(back), 30)
    got_there = await b.read_exactly(len(there), 30)
    await asyncio.gather(*sends)
    assert (got_there, got_back) == (there, back)


@pytest.mark.slow
@pytest.mark.parametrize(("sender", "receiver"), [("tcp", "tcp"), ("ws", "ws"), ("ws", "tcp")])
async def test_fifty_pairs_at_once_lose_no_byte(sender: str, receiver: str) -> None:
    async with Relay(TransitConfig()) as relay:
        sizes = [200_000 + 7919 * i for i in range(50)]
        await asyncio.gather(*(transfer(relay, sender, receiver, size) for size in sizes))
        await relay.settle()
        assert sorted(r.total_bytes for r in relay.records) == sorted(sizes)
        assert {r.result for r in relay.records} == {Mood.HAPPY}
