"""The reference's behaviour table (transit-relay-notes §1), over real sockets.

Each scenario runs against Pigeonhole's relay and the reference relay side by side, over
TCP, and over WebSocket where the reference's WebSocket side behaves the same; the rows
where we differ on purpose (a WebSocket handshake split over messages) are tested alone.
A scenario orders its sides with `waiting` (ours: until the relay has them waiting; the
reference, a process we cannot look into: a moment) and decides outcomes on events: what
came before the relay's close, or a probe's answer (transit_support).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import pytest

from tests.transit.transit_support import (
    IMPATIENT,
    Client,
    Reference,
    Relay,
    ending,
    line,
    side,
    still_waiting,
    token,
)

Open = Callable[[], Awaitable[Client]]
#: returns once `count` sides wait for a partner (the relay has read their lines)
Waiting = Callable[[int], Awaitable[None]]
Scenario = Callable[[Open, Waiting], Awaitable[object]]
#: what a side the relay keeps waiting sees when it sends bytes (`still_waiting`)
KEPT_WAITING = IMPATIENT


async def bad_line(open_: Open, waiting: Waiting) -> object:
    client = await open_()
    await client.send(b"hello relay\n")
    return await ending(client)


async def crlf(open_: Open, waiting: Waiting) -> object:
    client = await open_()
    await client.send(line(token(), side())[:-1] + b"\r\n")
    return await ending(client)


async def old_and_new(open_: Open, waiting: Waiting) -> object:
    tok = token()
    a, b = await open_(), await open_()
    await a.send(line(tok))
    await waiting(1)
    await b.send(line(tok, side()))
    return [await a.read(), await b.read()]


async def old_and_old(open_: Open, waiting: Waiting) -> object:
    tok = token()
    a, b = await open_(), await open_()
    await a.send(line(tok))
    await waiting(1)
    await b.send(line(tok))
    return [await a.read(), await b.read()]


async def same_side(open_: Open, waiting: Waiting) -> object:
    tok, sid = token(), side()
    a, b = await open_(), await open_()
    await a.send(line(tok, sid))
    await waiting(1)
    await b.send(line(tok, sid))
    await waiting(2)
    return [await still_waiting(a), await still_waiting(b)]


async def impatient(open_: Open, waiting: Waiting) -> object:
    client = await open_()
    await client.send(line(token(), side()))
    await waiting(1)
    await client.send(b"too soon")
    return await ending(client)


async def redundant(open_: Open, waiting: Waiting) -> object:
    """One A pairs with B (which one is the relay's), the other is closed; the pair is
    kept: bytes go both ways after the `ok`s, nothing else comes between."""
    tok, sid = token(), side()
    a1, a2, b = await open_(), await open_(), await open_()
    await a1.send(line(tok, sid))
    await a2.send(line(tok, sid))
    await waiting(2)
    await b.send(line(tok, side()))
    firsts = [await a1.read(), await a2.read()]
    if firsts[0] == b"":
        closed, paired = a1, a2
    else:
        closed, paired = a2, a1
    closed_saw = await ending(closed)  # nothing more, up to its EOF
    b_saw = await b.read()
    await b.send(b"to A")
    paired_saw = await paired.read_exactly(4)
    await paired.send(b"to B")
    return [sorted(firsts), closed_saw, b_saw, paired_saw, await b.read_exactly(4)]


async def long_line(open_: Open, waiting: Waiting) -> object:
    client = await open_()
    await client.send(b"x" * 1100)
    return await ending(client)


async def sender_closes(open_: Open, waiting: Waiting) -> object:
    tok = token()
    a, b = await open_(), await open_()
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    await a.read(), await b.read()
    data = os.urandom(100_000)
    await a.send(data)
    await a.close()
    got = await b.read_all()
    return [len(got), got == data]


async def later_pair_same_token(open_: Open, waiting: Waiting) -> object:
    """Dilation opens two pairs with one token: a later pair must still form."""
    tok = token()
    results = []
    for _ in range(2):
        a, b = await open_(), await open_()
        await a.send(line(tok, side()))
        await b.send(line(tok, side()))
        results.append([await a.read(), await b.read()])
        await a.close()
        await b.close()
    return results


TABLE: dict[str, tuple[Scenario, object]] = {
    "hello relay": (bad_line, b"bad handshake\n"),
    "ends with CRLF": (crlf, b"bad handshake\n"),
    "old form + new form": (old_and_new, [b"ok\n", b"ok\n"]),
    "old form + old form": (old_and_old, [b"ok\n", b"ok\n"]),
    "same token, same side": (same_side, [KEPT_WAITING, KEPT_WAITING]),
    "bytes before ok": (impatient, b"impatient\n"),
    "A1, A2 same side, then B": (redundant, [[b"", b"ok\n"], b"", b"ok\n", b"to A", b"to B"]),
    "1100 bytes, no newline": (long_line, b""),
    "A sends 100000 B and closes": (sender_closes, [100_000, True]),
    "a later pair of the same token": (later_pair_same_token, [[b"ok\n", b"ok\n"]] * 2),
}
#: rows whose WebSocket behaviour in the reference is the same as over TCP
WS_SAME = [
    "hello relay",
    "ends with CRLF",
    "old form + new form",
    "old form + old form",
    "same token, same side",
    "bytes before ok",
    "A1, A2 same side, then B",
    "a later pair of the same token",
]


@pytest.mark.parametrize("row", list(TABLE))
async def test_tcp_table_as_the_reference(row: str, relay: Relay, reference: Reference) -> None:
    scenario, expected = TABLE[row]
    assert await scenario(reference.tcp, reference.waiting) == expected, "the reference"
    assert await scenario(relay.tcp, relay.waiting) == expected


@pytest.mark.parametrize("row", WS_SAME)
async def test_websocket_table_as_the_reference(
    row: str, relay: Relay, reference: Reference
) -> None:
    scenario, expected = TABLE[row]
    assert await scenario(reference.ws, reference.waiting) == expected, "the reference"
    assert await scenario(relay.ws, relay.waiting) == expected


@pytest.mark.parametrize("row", ["1100 bytes, no newline", "A sends 100000 B and closes"])
async def test_websocket_rows_where_the_reference_differs(row: str, relay: Relay) -> None:
    scenario, expected = TABLE[row]
    assert await scenario(relay.ws, relay.waiting) == expected


async def test_half_close_ends_both(relay: Relay, reference: Reference) -> None:
    """A half-closes (SHUT_WR): B gets EOF and A is closed too (no half-close)."""
    for target in (reference, relay):
        tok = token()
        a, b = await target.tcp(), await target.tcp()
        await a.send(line(tok, side()))
        await b.send(line(tok, side()))
        assert [await a.read(), await b.read()] == [b"ok\n", b"ok\n"]
        await a.send(b"last words")
        await a.shutdown_write()
        assert await b.read_all(5) == b"last words"
        assert await a.read_all(5) == b""


async def test_websocket_handshake_split_over_messages(relay: Relay) -> None:
    tok = token()
    a, b = await relay.ws(), await relay.tcp()
    whole = line(tok, side())
    for part in (whole[:10], whole[10:40], whole[40:]):
        await a.send(part)
    await b.send(line(tok, side()))
    assert [await a.read(), await b.read()] == [b"ok\n", b"ok\n"]


async def test_tcp_handshake_split_over_reads_and_payload_after_it(relay: Relay) -> None:
    tok = token()
    a, b = await relay.tcp(), await relay.tcp()
    await a.send(line(tok, side()))
    whole = line(tok, side())
    await relay.waiting(1)
    await b.send(whole[:7])
    live = relay.relay.hub.live
    await relay.until(lambda: any(p.line is not None and p.line.pending for p in live))
    await b.send(whole[7:] + b"payload in the same read")
    assert await b.read() == b"ok\n"
    assert await a.read_exactly(3 + 24) == b"ok\npayload in the same read"


async def websocket_sender_to_tcp(target: Relay | Reference, size: int) -> bytes | None:
    """A WebSocket client sends `size` bytes and closes; what the TCP side got before EOF."""
    tok = token()
    a, b = await target.ws(), await target.tcp()
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert [await a.read(), await b.read()] == [b"ok\n", b"ok\n"]
    data = os.urandom(size)
    for start in range(0, size, 16384):
        await a.send(data[start : start + 16384])
    await a.close()
    try:
        got = await b.read_all(3)
    except TimeoutError:
        return None  # no EOF
    await b.close()
    assert got == data
    return got


@pytest.mark.parametrize("size", [200_000, 1_048_576])
async def test_websocket_sender_to_tcp_receiver_gets_every_byte_then_eof(
    relay: Relay, size: int
) -> None:
    """The reference's bug (a) (no EOF past ~64 KiB, notes §2) is not ours."""
    assert await websocket_sender_to_tcp(relay, size) is not None
