"""Bounded logging under attack: the first event of a kind per interval, then a count.

A flood repeats the same refusal thousands of times a second; one line each would fill
the disk the server is protecting. `note` logs an event of a kind the first time in an
interval and only counts repeats; `flush` (called every interval) writes one summary line
per kind that repeated: what, how many more, over how long.
"""

from __future__ import annotations

import logging
from collections.abc import Callable


class LogSummary:
    __slots__ = ("_clock", "_counts", "_log", "_since")

    def __init__(self, log: logging.Logger, clock: Callable[[], float]) -> None:
        self._log = log
        self._clock = clock
        #: kind -> repeats not yet logged, for kinds seen in the current interval
        self._counts: dict[str, int] = {}
        self._since = clock()

    def note(
        self, kind: str, line: str, fields: dict[str, object], level: int = logging.INFO
    ) -> None:
        """Log `line` if `kind` has not been logged this interval; else count it."""
        if self.first(kind):
            self._log.log(level, "%s", line, extra={"fields": fields})

    def first(self, kind: str) -> bool:
        """True for the first event of `kind` this interval (the caller logs it); repeats
        are counted and summarised by `flush`."""
        if kind in self._counts:
            self._counts[kind] += 1
            return False
        self._counts[kind] = 0
        return True

    def flush(self) -> None:
        """One line per kind that repeated since the last flush; a new interval begins."""
        now = self._clock()
        seconds = round(now - self._since)
        for kind, repeats in self._counts.items():
            if repeats:
                fields = {"kind": kind, "repeats": repeats, "seconds": seconds}
                self._log.warning(
                    "%s: %d more in the last %d s", kind, repeats, seconds, extra={"fields": fields}
                )
        self._counts.clear()
        self._since = now
