"""Counting what the bounds need: connections per address, bytes per address per day,
a per-connection rate, and the refusals by kind (logged once per interval, then counted).

Plain Python with the clock passed in; the relay calls these from its callbacks.
"""

from __future__ import annotations

import logging
from collections import Counter

LOG = logging.getLogger("pigeonhole.transit")

DAY_SECONDS = 86_400


class Refusal:
    """The kinds of refusal, as counted in `Refusals` (and the lead's metrics)."""

    CONNECTIONS = "connections"
    CONNECTIONS_PER_ADDRESS = "connections_per_address"
    DRAINING = "draining"
    BAD_HANDSHAKE = "bad_handshake"
    LINE_TOO_LONG = "line_too_long"
    IMPATIENT = "impatient"
    HANDSHAKE_TIMEOUT = "handshake_timeout"
    LONELY_TIMEOUT = "lonely_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    BYTES_PER_TRANSFER = "bytes_per_transfer"
    BYTES_PER_ADDRESS_PER_DAY = "bytes_per_address_per_day"
    TEXT_FRAME = "text_frame"


class Refusals:
    """Refusals by kind; the first of a kind in an interval is logged, repeats counted."""

    __slots__ = ("_interval", "_since", "_unlogged", "counts")

    def __init__(self, interval: float, now: float) -> None:
        self.counts: Counter[str] = Counter()
        self._interval = interval
        self._since = now
        #: kind -> repeats not yet logged in this interval
        self._unlogged: dict[str, int] = {}

    def note(self, kind: str, now: float) -> None:
        self.counts[kind] += 1
        self.note_time(now)
        if kind in self._unlogged:
            self._unlogged[kind] += 1
        else:
            self._unlogged[kind] = 0
            LOG.info("transit refusal: %s", kind, extra={"fields": {"kind": kind}})

    def note_time(self, now: float) -> None:
        """Called often: once an interval is over, its repeats are summarised."""
        if now - self._since >= self._interval:
            self.flush(now)

    def flush(self, now: float) -> None:
        """One line per kind that repeated in the interval; a new interval begins."""
        seconds = round(now - self._since)
        for kind, repeats in self._unlogged.items():
            if repeats:
                LOG.warning("transit refusal %s: %d more in the last %d s", kind, repeats, seconds)
        self._unlogged.clear()
        self._since = now


class AddressBook:
    """Open connections per address and bytes relayed per address in the current day."""

    __slots__ = ("_day", "bytes_today", "connections")

    def __init__(self) -> None:
        self.connections: Counter[str] = Counter()
        self.bytes_today: Counter[str] = Counter()
        self._day = -1

    def opened(self, address: str) -> None:
        self.connections[address] += 1

    def closed(self, address: str) -> None:
        left = self.connections[address] - 1
        if left > 0:
            self.connections[address] = left
        else:
            del self.connections[address]

    def charge(self, address: str, size: int, now: float) -> int:
        """Add `size` bytes to the address's day; the day's total so far."""
        day = int(now // DAY_SECONDS)
        if day != self._day:
            self._day = day
            self.bytes_today.clear()
        self.bytes_today[address] += size
        return self.bytes_today[address]


class TokenBucket:
    """`rate` bytes per second with up to one second's worth saved up."""

    __slots__ = ("_at", "_tokens", "rate")

    def __init__(self, rate: int, now: float) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._at = now

    def _refill(self, now: float) -> None:
        self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now

    def allowance(self, now: float) -> int:
        """Bytes that may be sent now (0: wait `delay(now)` seconds)."""
        self._refill(now)
        return int(self._tokens)

    def spend(self, size: int) -> None:
        self._tokens -= size

    def delay(self, now: float) -> float:
        """Seconds until at least a sixteenth of a second's bytes may be sent."""
        self._refill(now)
        wanted = self.rate / 16
        return 0.0 if self._tokens >= wanted else (wanted - self._tokens) / self.rate
