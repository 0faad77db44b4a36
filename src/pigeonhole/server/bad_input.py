"""Malformed input at the public doors: counted by door and kind, never a traceback a request.

A hostile client can send thousands of broken requests a second; each one gets its answer
(an HTTP status, a WebSocket close, the relay's `bad handshake`) and is counted here by
`(door, kind)` for /metrics and the status page, while the log gets the first of each kind
per interval and then a count (server/log_summary.py). Kinds are a bounded set: exception
class names of the parsers, header names, or the server's own fixed words.

aiohttp logs every request its parser refuses at ERROR with a traceback; `HttpErrorFilter`
on the logger given to aiohttp turns those into counts. An exception that is not a parser's
refusal is a bug of ours: its first traceback in an interval is kept, repeats are counted.
"""

from __future__ import annotations

import logging
from collections import Counter

from aiohttp.http_exceptions import HttpProcessingError

from pigeonhole.server.log_summary import LogSummary

log = logging.getLogger("pigeonhole.server")

#: what a detail (the parser's message, with the offending bytes) may add to the log line
DETAIL_CHARS = 120


class BadInput:
    """Counts of malformed input by (door, kind), with the summarised log."""

    __slots__ = ("_summary", "counts")

    def __init__(self, summary: LogSummary) -> None:
        self._summary = summary
        self.counts: Counter[tuple[str, str]] = Counter()

    def note(self, door: str, kind: str, detail: str = "") -> None:
        self.counts[(door, kind)] += 1
        what = f"bad input at {door}: {kind}"
        if not self._summary.first(what):
            return  # a repeat in this interval: counted, its line left for the summary
        shown = f" {detail[:DETAIL_CHARS]!r}" if detail else ""
        log.info("%s%s", what, shown, extra={"fields": {"door": door, "kind": kind}})

    def unexpected(self, door: str, exc: BaseException) -> bool:
        """Count an exception no door expected (a bug); True when its traceback is to be
        logged (the first of its kind in the interval)."""
        kind = f"unhandled {type(exc).__name__}"
        self.counts[(door, kind)] += 1
        return self._summary.first(f"bad input at {door}: {kind}")


class HttpErrorFilter(logging.Filter):
    """On the logger aiohttp's request handler uses: parser refusals become counts."""

    def __init__(self, bad: BadInput, door: str) -> None:
        super().__init__()
        self._bad = bad
        self._door = door

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        if isinstance(exc, HttpProcessingError):
            # aiohttp answered it (400, 413, 431 ...): count, and log once per interval
            lines = [line.strip() for line in (exc.message or "").splitlines() if line.strip()]
            self._bad.note(self._door, type(exc).__name__, " ".join(lines[:2]))
            return False
        if isinstance(exc, ConnectionError):
            return False  # the client left before its answer: nothing wrong on our side
        return self._bad.unexpected(self._door, exc)


def http_logger(bad: BadInput, door: str = "http") -> logging.Logger:
    """The logger aiohttp's request handler is given: one per server (so two servers in one
    process count their own), named `pigeonhole.http`, its records going up the usual tree."""
    logger = logging.Logger("pigeonhole.http")
    logger.parent = logging.getLogger("pigeonhole")
    logger.addFilter(HttpErrorFilter(bad, door))
    return logger
