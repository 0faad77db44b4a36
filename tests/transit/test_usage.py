"""Usage records over real sockets, moods compared with the reference relay's database."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from transit_support import Client, Reference, Relay, line, outcome, side, token
from wormhole_transit_relay.usage import blur_size as reference_blur_size  # type: ignore[import-untyped]

from pigeonhole.transit import Mood, TransitConfig, UsageQueue
from pigeonhole.transit.usage import UsageRecord, blur_size, make_record

Open = Callable[[], Awaitable[Client]]


async def every_mood(open_: Open) -> None:
    """One connection of each unpaired mood, then a redundant one and a happy pair."""
    empty = await open_()
    await empty.close()
    errory = await open_()
    await errory.send(b"hello relay\n")
    await outcome(errory)
    impatient = await open_()
    await impatient.send(line(token(), side()) + b"early")
    await outcome(impatient)
    lonely = await open_()
    await lonely.send(line(token(), side()))
    await asyncio.sleep(0.1)
    await lonely.close()
    tok, sid = token(), side()
    a1, a2, b = await open_(), await open_(), await open_()
    await a1.send(line(tok, sid))
    await a2.send(line(tok, sid))
    await asyncio.sleep(0.1)
    await b.send(line(tok, side()))
    await outcome(a1)
    await outcome(a2)
    await b.send(os.urandom(5000))
    await b.close()
    await asyncio.sleep(0.3)


EXPECTED = sorted(["empty", "errory", "impatient", "lonely", "redundant", "happy"])


async def test_moods_as_the_reference(tmp_path: Path) -> None:
    reference = Reference(tmp_path)
    try:
        await every_mood(reference.tcp)
        await asyncio.sleep(0.5)
        moods = reference.moods()
        moods.remove("empty")  # the connection that checked it was listening
        assert sorted(moods) == EXPECTED
    finally:
        reference.stop()
    async with Relay(TransitConfig()) as relay:
        await every_mood(relay.tcp)
        await relay.settle()
        assert sorted(r.result for r in relay.records) == EXPECTED
        happy = [r for r in relay.records if r.result is Mood.HAPPY]
        assert happy[0].total_bytes == 5000 and happy[0].waiting_time is not None


async def test_websocket_connections_have_the_same_moods() -> None:
    async with Relay(TransitConfig()) as relay:
        await every_mood(relay.ws)
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
