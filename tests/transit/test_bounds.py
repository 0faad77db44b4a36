"""The relay's bounds over real sockets: timeouts, connection caps, the per-pair buffer,
the optional byte and rate caps, text frames, and the drain. The timeouts are decided on
the relay's clock, which the test moves before it asks for a check; the drain, whose timer
is the event loop's, runs with short values."""

from __future__ import annotations

import asyncio
import os
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pigeonhole.transit import Mood, TransitConfig
from pigeonhole.transit.limits import Refusal
from pigeonhole.transit.tcp import READ_BYTES
from tests.transit.transit_support import Relay, TcpClient, WsClient, ending, line, side, token

KIB = 1024


def refusals(relay: Relay) -> dict[str, int]:
    return relay.refusals()


async def paired(relay: Relay, receiver: str = "tcp") -> tuple[TcpClient, TcpClient | WsClient]:
    tok = token()
    a = await relay.tcp()
    b = await (relay.tcp() if receiver == "tcp" else relay.ws())
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert (await a.read(), await b.read()) == (b"ok\n", b"ok\n")
    return a, b


async def test_handshake_timeout_closes_a_silent_connection() -> None:
    async with Relay(TransitConfig(handshake_timeout=30)) as relay:
        silent, partial = await relay.tcp(), await relay.ws()
        await partial.send(b"please relay ")
        await relay.connections(2)
        relay.clock.advance(29)
        relay.relay.check_timeouts()
        assert relay.figures()["connections"] == 2  # not yet
        relay.clock.advance(2)
        relay.relay.check_timeouts()
        assert await ending(silent) == b""
        assert await ending(partial) == b""
        await relay.settle()
        assert [r.result for r in relay.records] == [Mood.EMPTY, Mood.EMPTY]
        assert refusals(relay) == {Refusal.HANDSHAKE_TIMEOUT: 2}


async def test_lonely_timeout_closes_a_connection_without_partner() -> None:
    async with Relay(TransitConfig(lonely_timeout=300)) as relay:
        client = await relay.tcp()
        await client.send(line(token(), side()))
        await relay.waiting(1)
        relay.clock.advance(299)
        relay.relay.check_timeouts()
        assert relay.figures()["waiting"] == 1  # not yet
        relay.clock.advance(2)
        relay.relay.check_timeouts()
        assert await ending(client) == b""
        await relay.settle()
        assert [r.result for r in relay.records] == [Mood.LONELY]
        assert relay.records[0].waiting_time is None
        assert relay.records[0].total_time > 300  # on the relay's clock
        assert refusals(relay) == {Refusal.LONELY_TIMEOUT: 1}


async def test_idle_timeout_ends_a_quiet_pair_but_not_a_busy_one() -> None:
    async with Relay(TransitConfig(idle_timeout=900)) as relay:
        quiet_a, quiet_b = await paired(relay)
        busy_a, busy_b = await paired(relay)
        for _ in range(3):  # 1500 s in all: busy moves a byte every 500 s
            relay.clock.advance(500)
            relay.relay.check_timeouts()
            await busy_a.send(b"tick")
            assert await busy_b.read() == b"tick"
        assert await ending(quiet_a) == b""
        assert await ending(quiet_b) == b""
        await busy_b.send(b"tock")  # still open both ways
        assert await busy_a.read() == b"tock"
        assert refusals(relay) == {Refusal.IDLE_TIMEOUT: 1}
        await busy_a.close()
        assert await busy_b.read_all() == b""
        await busy_b.close()


async def pair_up(one: TcpClient, other: TcpClient) -> tuple[bytes | None, bytes | None]:
    """Both send a handshake of one token: what each is answered (`ok` when both were
    taken and kept)."""
    tok = token()
    await one.send(line(tok, side()))
    await other.send(line(tok, side()))
    return await one.read(), await other.read()


async def test_connections_per_address_and_in_total() -> None:
    async with Relay(TransitConfig(max_connections_per_address=3)) as relay:
        clients = [await relay.tcp() for _ in range(3)]
        await relay.connections(3)
        over = await relay.tcp()
        assert await ending(over) == b""
        try:
            async with connect(relay.ws_url) as ws:
                await ws.recv()
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1013
        assert refusals(relay) == {Refusal.CONNECTIONS_PER_ADDRESS: 2}
        await clients[0].close()
        await relay.connections(2)
        again = await relay.tcp()  # a slot is free again: taken, and it pairs
        elsewhere = await TcpClient.open(relay.port, source="127.0.0.2")
        assert await pair_up(again, elsewhere) == (b"ok\n", b"ok\n")
    async with Relay(TransitConfig(max_connections=2)) as relay:
        first = [await relay.tcp(), await relay.tcp()]
        await relay.connections(2)
        assert await ending(await relay.tcp()) == b""
        assert refusals(relay) == {Refusal.CONNECTIONS: 1}
        assert await pair_up(*first) == (b"ok\n", b"ok\n")  # the two held are kept


async def fill_until_blocked(client: TcpClient, limit: int) -> int:
    """Write until the relay stops taking bytes (or `limit`); how many were written."""
    chunk, sent = os.urandom(256 * KIB), 0
    while sent < limit:
        client.writer.write(chunk)
        try:
            await asyncio.wait_for(client.writer.drain(), 0.5)
        except TimeoutError:
            return sent + len(chunk)
        sent += len(chunk)
    return sent


async def test_a_receiver_that_does_not_read_holds_the_server_to_the_bound() -> None:
    bound = 256 * KIB
    for receiver, slack in (("tcp", 0), ("ws", READ_BYTES)):
        async with Relay(TransitConfig(pair_buffer_bytes=bound)) as relay:
            a, b = await paired(relay, receiver)
            sent = await fill_until_blocked(a, 256 * 1024 * KIB)
            assert sent < 64 * 1024 * KIB, "the sender was never stopped"
            assert relay.relay.held_bytes() <= bound // 2 + slack
            # and every byte still arrives once the receiver reads
            received = 0
            while received < sent:
                chunk = await b.read(5)
                assert chunk, f"stalled at {received} of {sent}"
                received += len(chunk)
            assert received == sent
            await a.close()


async def test_bytes_per_transfer_cap_ends_the_pair() -> None:
    async with Relay(TransitConfig(max_bytes_per_transfer=100_000)) as relay:
        a, b = await paired(relay)
        await a.send(os.urandom(400_000))
        got = await b.read_all(5)
        await a.close()
        await b.close()  # as a client does at EOF
        assert 0 < len(got) < 400_000
        assert refusals(relay) == {Refusal.BYTES_PER_TRANSFER: 1}
        await relay.settle()
        assert [r.result for r in relay.records] == [Mood.HAPPY]


async def test_bytes_per_address_per_day_cap() -> None:
    async with Relay(TransitConfig(max_bytes_per_address_per_day=300_000)) as relay:
        a, b = await paired(relay)
        await a.send(b"x" * 200_000)
        assert len(await b.read_exactly(200_000)) == 200_000
        await a.close()
        c, d = await paired(relay)
        await c.send(b"y" * 200_000)
        assert len(await d.read_all(5)) < 200_000
        assert refusals(relay) == {Refusal.BYTES_PER_ADDRESS_PER_DAY: 1}


async def test_rate_cap_slows_the_sender_without_closing() -> None:
    for receiver in ("tcp", "ws"):
        async with Relay(TransitConfig(max_rate_bytes_per_second=1_000_000)) as relay:
            a, b = await paired(relay, receiver)
            started = time.monotonic()
            data = os.urandom(2_500_000)
            sending = asyncio.create_task(a.send(data))
            assert await b.read_exactly(len(data), 10) == data
            await sending
            # one second's burst, then 1 MB/s: about 1.5 s for the rest
            assert time.monotonic() - started > 1.0
            assert not refusals(relay)


async def test_text_frames_are_refused_with_1003(relay: Relay) -> None:
    async with connect(relay.ws_url) as ws:
        await ws.send("please relay " + token())
        try:
            await asyncio.wait_for(ws.recv(), 2)
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1003
    assert refusals(relay) == {Refusal.TEXT_FRAME: 1}


async def test_stop_drains_active_pairs_then_closes() -> None:
    async with Relay(TransitConfig()) as relay:
        a, b = await paired(relay)
        lonely = await relay.tcp()
        await lonely.send(line(token(), side()))
        await relay.waiting(1)
        stopping = asyncio.create_task(relay.relay.stop(drain_timeout=5))
        assert await ending(lonely) == b""  # no partner can come any more
        await a.send(b"finishing within the drain")
        assert await b.read(2) == b"finishing within the drain"
        assert not stopping.done()
        await a.close()
        await asyncio.wait_for(stopping, 3)
    async with Relay(TransitConfig()) as relay:
        a, b = await paired(relay)
        started = time.monotonic()
        await relay.relay.stop(drain_timeout=0.3)
        assert time.monotonic() - started < 3
        assert await ending(b) == b""
