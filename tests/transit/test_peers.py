"""Pairs across relays sharing a pairing directory: each side on a different relay.

The directory here is a plain shared list (the server keeps it in PostgreSQL); the
relays, their sockets and the clients are real.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import AsyncIterator

import pytest

from pigeonhole.transit import Mood, TransitConfig
from pigeonhole.transit.peers import Address, Found, format_address, parse_address
from tests.support.process import free_port
from tests.transit.transit_support import (
    IMPATIENT,
    Relay,
    TcpClient,
    line,
    side,
    still_waiting,
    token,
)

MIB = 1024 * 1024

#: (token, side, relay address, ticket) of every waiting connection recorded
Rows = list[tuple[str, str | None, Address, str]]


class SharedList:
    """One relay's view of a directory shared by every relay in the test."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self.address: Address = ("127.0.0.1", 0)

    async def meet(self, token: str, side: str | None, ticket: str) -> Found | None:
        for row_token, row_side, address, row_ticket in self.rows:
            fits = row_side is None or side is None or row_side != side
            if row_token == token and address != self.address and fits:
                return Found(address, row_ticket)
        self.rows.append((token, side, self.address, ticket))
        return None

    async def left(self, token: str, side: str | None) -> None:
        for row in self.rows:
            if row[:3] == (token, side, self.address):
                self.rows.remove(row)
                return

    async def gone(self, address: Address) -> None:
        self.rows[:] = [row for row in self.rows if row[2] != address]


@pytest.fixture
async def relays() -> AsyncIterator[tuple[Relay, Relay, Rows]]:
    rows: Rows = []
    one, two = Relay(TransitConfig()), Relay(TransitConfig())
    for relay in (one, two):
        relay.relay.directory = directory = SharedList(rows)
        await relay.__aenter__()
        directory.address = ("127.0.0.1", relay.port)
    try:
        yield one, two, rows
    finally:
        for relay in (one, two):
            await relay.__aexit__(None, None, None)


async def until(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(condition) or not condition():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.02)


async def waiting_on(relay: Relay, rows: Rows, tok: str, sid: str | None) -> TcpClient:
    client = await relay.tcp()
    await client.send(line(tok, sid))
    here = ("127.0.0.1", relay.port)
    await until(lambda: any(row[:3] == (tok, sid, here) for row in rows))
    return client


async def test_sides_on_two_relays_pair_and_move_four_mib_each_way(
    relays: tuple[Relay, Relay, Rows],
) -> None:
    one, two, rows = relays
    tok = token()
    first = await waiting_on(one, rows, tok, side())
    second = await two.tcp()
    await second.send(line(tok, side()))
    assert await first.read(5) == b"ok\n"
    assert await second.read(5) == b"ok\n"
    there, back = os.urandom(4 * MIB), os.urandom(4 * MIB)
    sends = [asyncio.create_task(c.send(d)) for c, d in ((first, there), (second, back))]
    got_back = await first.read_exactly(len(back), 60)
    got_there = await second.read_exactly(len(there), 60)
    await asyncio.gather(*sends)
    assert hashlib.sha256(got_there).digest() == hashlib.sha256(there).digest()
    assert hashlib.sha256(got_back).digest() == hashlib.sha256(back).digest()
    await first.close()
    assert await second.read_all(10) == b""  # EOF through both relays
    await second.close()
    await until(lambda: not rows)
    await one.settle()
    await two.settle()
    assert [r.result for r in one.records] == [Mood.HAPPY]  # the pair's one record
    assert one.records[0].total_bytes == 8 * MIB
    assert two.records == []  # the forwarding relay keeps none
    assert not one.relay.hub.live and not two.relay.hub.live


async def test_a_websocket_side_pairs_with_a_tcp_side_on_another_relay(
    relays: tuple[Relay, Relay, Rows],
) -> None:
    one, two, rows = relays
    tok = token()
    first = await waiting_on(one, rows, tok, side())
    second = await two.ws()  # its bytes go through Python on relay two
    await second.send(line(tok, side()))
    assert await first.read(5) == b"ok\n"
    assert await second.read(5) == b"ok\n"
    there, back = os.urandom(MIB), os.urandom(MIB)
    sends = [asyncio.create_task(c.send(d)) for c, d in ((first, there), (second, back))]
    got_back = await first.read_exactly(MIB, 30)
    got_there = await second.read_exactly(MIB, 30)
    await asyncio.gather(*sends)
    assert (got_there, got_back) == (there, back)
    await second.close()
    assert await first.read_all(10) == b""
    await first.close()
    await until(lambda: not rows)


async def test_the_same_side_on_two_relays_never_pairs(
    relays: tuple[Relay, Relay, Rows],
) -> None:
    one, two, rows = relays
    tok, sid = token(), side()
    first = await waiting_on(one, rows, tok, sid)
    second = await waiting_on(two, rows, tok, sid)
    assert len(rows) == 2
    assert await still_waiting(first) == IMPATIENT  # nothing came: each still waits
    assert await still_waiting(second) == IMPATIENT
    await until(lambda: not rows)


async def test_a_waiter_that_leaves_takes_its_record_with_it(
    relays: tuple[Relay, Relay, Rows],
) -> None:
    one, _, rows = relays
    client = await waiting_on(one, rows, token(), None)
    await client.close()
    await until(lambda: not rows)
    await one.settle()
    assert [r.result for r in one.records] == [Mood.LONELY]


async def test_a_pair_on_one_relay_pairs_there_and_clears_its_record(
    relays: tuple[Relay, Relay, Rows],
) -> None:
    one, _, rows = relays
    tok = token()
    first = await waiting_on(one, rows, tok, side())
    second = await one.tcp()
    await second.send(line(tok, side()))
    assert await first.read(5) == b"ok\n" and await second.read(5) == b"ok\n"
    await until(lambda: not rows)


async def test_a_record_of_a_relay_that_does_not_answer_is_dropped(
    relays: tuple[Relay, Relay, Rows],
) -> None:
    one, two, rows = relays
    tok = token()
    dead = ("127.0.0.1", free_port())
    rows.append((tok, None, dead, "00" * 16))
    first = await waiting_on(two, rows, tok, side())  # tried the dead relay, waits here
    assert [row[2] for row in rows] == [("127.0.0.1", two.port)]
    second = await one.tcp()
    await second.send(line(tok, side()))
    assert await first.read(5) == b"ok\n" and await second.read(5) == b"ok\n"


def test_relay_addresses_are_host_and_port() -> None:
    assert parse_address("10.0.0.2:4001") == ("10.0.0.2", 4001)
    assert parse_address("[::1]:4001") == ("::1", 4001)
    assert parse_address(format_address(("::1", 4001))) == ("::1", 4001)
    with pytest.raises(ValueError):
        parse_address("10.0.0.2")
