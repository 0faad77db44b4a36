"""The server's event log (one structured line an event, repeats summarised) and its
background tasks.

Refusals under attack cost one line per kind per `--log-summary-interval`
(server/log_summary.py); malformed input is counted by door and kind
(server/bad_input.py); client addresses are left out under `--blur-usage`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from pigeonhole.protocol.limits import LIMIT_ERRORS
from pigeonhole.server.bad_input import BadInput
from pigeonhole.server.log_summary import LogSummary
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.settings import Settings

log = logging.getLogger("pigeonhole.server")


class Peer(Protocol):
    """A client connection as the log sees it."""

    @property
    def address(self) -> str: ...


class Events:
    """Structured log lines, summarised by kind; refused commands counted and logged."""

    __slots__ = ("_metrics", "_settings", "bad_input", "summary")

    def __init__(self, settings: Settings, metrics: Metrics, summary: LogSummary) -> None:
        self._settings = settings
        self._metrics = metrics
        self.summary = summary
        #: malformed input at every door, counted by (door, kind)
        self.bad_input = BadInput(summary)

    def event(
        self, what: str, conn: Peer | None, kind: str | None = None, **fields: object
    ) -> None:
        """One structured log line; client addresses are left out under --blur-usage.

        With a `kind`, repeats within the summary interval are counted, not written.
        """
        if self._settings.current.blur_usage:
            fields.pop("address", None)
        elif conn is not None:
            fields.setdefault("address", conn.address)
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        line = f"{what} {detail}"
        if kind is None:
            log.info("%s", line, extra={"fields": fields})
        else:
            self.summary.note(kind, line, fields)

    def refused(self, explain: str, conn: Peer) -> None:
        """A command got an `error`: counted by kind; limit and quota refusals logged."""
        kind = self._metrics.count_error(explain)
        if kind in LIMIT_ERRORS:
            self.event("refused", conn, kind=kind, error=explain)


class Tasks:
    """Tasks the server starts in the background (closes, replays), kept until done."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
