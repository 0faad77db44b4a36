"""Per-peer minimum interval between requests (status-go's mailserver `limiter.go`).

A peer is allowed when it has no entry or its last allowed request is more than
`interval` seconds old; an allowed request records `now`, a refused one does not
(so waiting always helps). Pure: `now` is passed in.
"""

from __future__ import annotations

#: entries are swept when the table grows past this many peers
_SWEEP_AT = 4096


class RateLimiter:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}

    def allow(self, peer: str, now: float) -> bool:
        """Record and allow, or refuse without recording; always allows when interval is 0."""
        if self.interval <= 0:
            return True
        last = self._last.get(peer)
        if last is not None and now - last <= self.interval:
            return False
        if len(self._last) >= _SWEEP_AT:
            self.sweep(now)
        self._last[peer] = now
        return True

    def sweep(self, now: float) -> None:
        """Forget peers whose last request no longer limits them."""
        self._last = {p: t for p, t in self._last.items() if now - t <= self.interval}

    def __len__(self) -> int:
        return len(self._last)
