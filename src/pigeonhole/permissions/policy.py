"""Which permission methods the server offers and how hard hashcash is right now.

The hashcash difficulty rises by itself under load: `bits` is the base, and every
doubling of the new-connection rate above `load_threshold` (connections per second,
measured over `load_window` seconds) adds one bit, up to `max_bits`. Each connection is
told its bits in its welcome, so clients pay more only while the server is busy.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from pigeonhole.permissions.hashcash import verify_stamp
from pigeonhole.protocol.errors import ProtocolError

METHODS = ("none", "hashcash")


@dataclass
class ConnectionRate:
    """Connections started within the last `window` seconds (times passed in)."""

    window: float
    _times: deque[float] = field(default_factory=deque)

    def record(self, now: float) -> None:
        self._times.append(now)
        self._trim(now)

    def per_second(self, now: float) -> float:
        self._trim(now)
        return len(self._times) / self.window

    def _trim(self, now: float) -> None:
        cutoff = now - self.window
        while self._times and self._times[0] < cutoff:
            self._times.popleft()


def extra_bits(rate: float, threshold: float, headroom: int) -> int:
    """One more bit per doubling of `rate` above `threshold`, at most `headroom`."""
    if threshold <= 0 or rate <= threshold or headroom <= 0:
        return 0
    return min(headroom, int(math.log2(rate / threshold)) + 1)


@dataclass
class PermissionPolicy:
    """The server's policy; each session asks it as the protocol's `PermissionCheck`."""

    methods: tuple[str, ...] = ("none",)
    bits: int = 20
    max_bits: int = 24
    load_threshold: float = 20.0
    load_window: float = 10.0
    #: accepted stamp dates: within this many seconds of now
    date_window: float = 2 * 86400.0
    _rate: ConnectionRate = field(init=False)
    _seen: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.methods) - set(METHODS)
        if unknown or not self.methods:
            raise ValueError(f"permission methods must be among {METHODS}, got {self.methods}")
        self._rate = ConnectionRate(self.load_window)

    @property
    def open_to_all(self) -> bool:
        return "none" in self.methods

    @property
    def offers_hashcash(self) -> bool:
        return "hashcash" in self.methods

    def current_bits(self, now: float) -> int:
        rate = self._rate.per_second(now)
        return self.bits + extra_bits(rate, self.load_threshold, self.max_bits - self.bits)

    def challenge(self, resource: str, now: float) -> tuple[dict[str, object], int]:
        """Welcome `permission-required` for a new connection, and the bits it must pay."""
        self._rate.record(now)
        required: dict[str, object] = {}
        bits = self.current_bits(now)
        if "none" in self.methods:
            required["none"] = {}
        if "hashcash" in self.methods:
            required["hashcash"] = {"bits": bits, "resource": resource}
        return required, bits

    def check(self, method: object, stamp: object, resource: str, bits: int, now: float) -> None:
        """Grant or raise ProtocolError; a stamp is accepted only once (no replay)."""
        if method not in self.methods:
            offered = ", ".join(self.methods)
            raise ProtocolError(f"permission method {method!r} is not one of: {offered}")
        if method == "none":
            return
        if not isinstance(stamp, str):
            raise ProtocolError("hashcash permission requires a 'stamp' string")
        verify_stamp(stamp, resource=resource, bits=bits, now=now, window=self.date_window)
        self._forget_old(now)
        if stamp in self._seen:
            raise ProtocolError("hashcash stamp was already used")
        self._seen[stamp] = now

    def _forget_old(self, now: float) -> None:
        # a stamp older than the date window is refused anyway, so it can be forgotten
        cutoff = now - 2 * self.date_window
        while self._seen:
            oldest, when = next(iter(self._seen.items()))
            if when >= cutoff:
                break
            del self._seen[oldest]
