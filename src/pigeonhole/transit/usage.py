"""Usage records with the reference relay's fields and moods, and the way out of them.

One record per connection that did not pair (`lonely`, `redundant`, `errory`,
`impatient`, `empty`) and one per pair (`happy`, both directions' bytes), computed as the
reference's `UsageTracker.record` does, `--blur-usage` included. The relay hands each
finished record to a sink: a plain callback, or a `UsageQueue` a writer task reads.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass


class Mood(enum.StrEnum):
    HAPPY = "happy"
    JILTED = "jilted"  # kept for the reference's vocabulary; one record per pair is happy
    LONELY = "lonely"
    REDUNDANT = "redundant"
    ERRORY = "errory"
    IMPATIENT = "impatient"
    EMPTY = "empty"


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """The reference's `usage` row: epoch seconds, seconds, seconds or None, bytes."""

    started: float
    total_time: float
    waiting_time: float | None
    total_bytes: int
    result: Mood


UsageSink = Callable[[UsageRecord], None]


def _round_up(size: int, coarseness: float) -> int:
    return int(coarseness * (1 + int((size - 1) / coarseness)))


def blur_size(size: int) -> int:
    """Sizes rounded up: to 10 kB below 1 MB, to 1 MB below 1 GB, else to 100 MB."""
    if size == 0:
        return 0
    if size < 1e6:
        return _round_up(size, 10e3)
    if size < 1e9:
        return _round_up(size, 1e6)
    return _round_up(size, 100e6)


def make_record(
    started: float,
    partner_started: float | None,
    finished: float,
    total_bytes: int,
    mood: Mood,
    blur: int = 0,
) -> UsageRecord:
    """A record as the reference writes it (`started` is the recording side's connect)."""
    if partner_started is None:
        total_time, waiting_time = finished - started, None
    else:
        first, last = min(started, partner_started), max(started, partner_started)
        total_time, waiting_time = finished - first, last - first
    if blur:
        started = blur * (started // blur)
        total_bytes = blur_size(total_bytes)
    return UsageRecord(started, total_time, waiting_time, total_bytes, mood)


class UsageQueue:
    """A sink that queues records for a writer task (`await queue.get()`), bounded.

    When the writer falls behind by `maxsize` records the oldest are dropped and
    counted in `dropped`: the relay never waits for its usage writer.
    """

    def __init__(self, maxsize: int = 100_000) -> None:
        self._queue: asyncio.Queue[UsageRecord] = asyncio.Queue(maxsize)
        self.dropped = 0

    def __call__(self, record: UsageRecord) -> None:
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(record)

    async def get(self) -> UsageRecord:
        return await self._queue.get()

    def drain(self) -> list[UsageRecord]:
        """Every record queued now, without waiting (a writer's batch)."""
        records = []
        while not self._queue.empty():
            records.append(self._queue.get_nowait())
        return records
