"""The rate cap on the event loop: a sender held to its token bucket.

The core gives each side of a pair a `TokenBucket` (limits.py, plain arithmetic with the
clock passed in) when `max_rate_bytes_per_second` is set. Both ways bytes move, through
Python (hub.py) and through the kernel (splice.py), ask the relay's one `Throttle` how much
a side may send now, and, when it has spent its allowance, to wake it once it may send
again; the sender's reading is stopped in between, so its TCP window closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pigeonhole.transit.limits import TokenBucket


class Throttle:
    """Token buckets read with the relay's clock; the wake-ups on its loop."""

    __slots__ = ("_clock", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float]) -> None:
        self._loop = loop
        self._clock = clock

    def room(self, bucket: TokenBucket, size: int, resume: Callable[[], object]) -> int:
        """How much of `size` bytes the bucket lets go now (the clock read once). 0: none,
        and `resume` is called once some may; the caller stops reading until then."""
        now = self._clock()
        allowance = bucket.allowance(now)
        if allowance > 0:
            return min(size, allowance)
        self._loop.call_later(bucket.delay(now), resume)
        return 0
