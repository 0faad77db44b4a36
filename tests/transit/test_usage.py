"""Usage records over real sockets, moods compared with the reference relay's database."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from wormhole_transit_relay.usage import blur_size as reference_blur_size  # type: ignore[import-untyped]

from pigeonhole.transit import Mood, TransitConfig, UsageQueue
from pigeonhole.transit.usage import UsageRecord, blur_size, make_record
from tests.transit.transit_support import BOUND, Client, Reference, Relay, ending, line, side, token

Open = Callable[[], Awaitable[Client]]
#: returns once `count` sides wait for a partner
Waiting = Callable[[int], Awaitable[None]]


async def every_mood(open_: Open, waiting: Waiting) -> None:
    """One connection of each unpaired mood, then a redundant one and a happy pair; every
    connection ends before this returns."""
    empty = await open_()
    await empty.close()
    errory = await open_()
    await errory.send(b"hello relay\n")
    await ending(errory)
    impatient = await open_()
    await impatient.send(line(token(), side()) + b"early")
    await ending(impatient)
    lonely = await open_()
    await lonely.send(line(token(), side()))
    await waiting(1)
    await lonely.close()
    tok, sid = token(), side()
    a1, a2, b = await open_(), await open_(), await open_()
    await a1.send(line(tok, sid))
    await a2.send(line(tok, sid))
    await waiting(2)
    await b.send(line(tok, side()))
    firsts = [await a1.read(), await a2.read()]
    assert sorted(firsts) == [b"", b"ok\n"]  # one pairs, the other is redundant
    paired, closed = (a1, a2) if firsts[0] == b"ok\n" else (a2, a1)
    assert await ending(closed) == b""
    assert await b.read() == b"ok\n"
    data = os.urandom(5000)
    await b.send(data)
    await b.close()
    assert await ending(paired) == data


async def moods_of(reference: Reference, count: int) -> list[str]:
    """The reference's recorded moods once it has `count` (each is committed when its
    connection ends)."""
    for _ in range(int(BOUND / 0.05)):
        moods = reference.moods()
        if len(moods) >= count:
            return moods
        await asyncio.sleep(0.05)
    raise AssertionError(f"the reference recorded {reference.moods()}")


EXPECTED = sorted(["empty", "errory", "impatient", "lonely", "redundant", "happy"])


async def test_moods_as_the_reference(tmp_path: Path) -> None:
    reference = Reference(tmp_path)
    try:
        await every_mood(reference.tcp, reference.waiting)
        moods = await moods_of(reference, len(EXPECTED) + 1)
        moods.remove("empty")  # the connection that checked it was listening
        assert sorted(moods) == EXPECTED
    finally:
        reference.stop()
    async with Relay(TransitConfig()) as relay:
        await every_mood(relay.tcp, relay.waiting)
        await relay.settle()
        assert sorted(r.result for r in relay.records) == EXPECTED
        happy = [r for r in relay.records if r.result is Mood.HAPPY]
        assert happy[0].total_bytes == 5000 and happy[0].waiting_time is not None


async def test_websocket_connections_have_the_same_moods() -> None:
    async with Relay(TransitConfig()) as relay:
        await every_mood(relay.ws, relay.waiting)
        await relay.settle()
        assert sorted(r.result for r in relay.records) == EXPECTED


async def test_usage_queue_hands_records_to_a_writer() -> None:
    queue = UsageQueue(maxsize=2)
    for size in (1, 2, 3):
        queue(make(size))
    assert queue.dropped == 1
    assert (await queue.get()).total_bytes == 2
    assert [r.total_bytes for r in queue.drain()] == [3]


def make(size: int) -> UsageRecord:
    return make_record(0, None, 1, size, Mood.LONELY)


def test_blur_size_is_the_reference_function() -> None:
    sizes = [0, 1, 9_999, 10_000, 10_001, 999_999, 1_000_000, 1_000_001, 999_999_999]
    sizes += [10**9, 10**9 + 1, 12_345_678_901]
    assert [blur_size(n) for n in sizes] == [reference_blur_size(n) for n in sizes]
