"""Usage retention (`--usage-retention-days N`): old usage rows deleted in the background.

The usage tables only grow (about 410 bytes an exchange). With a retention of N days,
rows whose time is more than N days old are deleted, one table at a time, in windows of
at most BATCH_ROWS rows taken in id order (ids only grow, so this is oldest first and a
range of the primary key, never a scan): each window is one short DELETE, and the task
sleeps between windows, so neither the event loop nor the database's writer is held for
long. A table's pass ends at the first window with nothing old in it: a row written long
after its start (a channel that lived for hours) goes with the rows written around it.
Deleted ids are never reused, so `export-usage`'s cursors are unaffected, and each
table's newest row always stays: the export takes a cursor past a table's last id for a
dataset of another database. Rows must be exported before they age out
(docs/operations.md).

Both stores run the same loop (`prune_usage`) over their own `Window`: SQLite on a
connection of its own in a worker thread, PostgreSQL on the store's pool.
`usage_file_bytes` is the SQLite usage database's size for the status page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("pigeonhole.store")

#: (table, the column holding its row's time), for every usage table that grows
USAGE_TIMES: tuple[tuple[str, str], ...] = (
    ("nameplates", "started"),
    ("mailboxes", "started"),
    ("client_versions", "connect_time"),
    ("connection_counts", "sampled"),
    ("transit", "started"),
)
#: rows one window covers: one DELETE of a few milliseconds
BATCH_ROWS = 500
#: seconds slept between windows: the writer has the database to itself meanwhile
PAUSE = 0.02
DAY = 86400.0

#: (table, time column, after id, delete rows older than, window rows) ->
#: (rows deleted, the window's last id or None when no row is past `after`)
Window = Callable[[str, str, int, float, int], Awaitable[tuple[int, int | None]]]


async def prune_usage(
    window: Window, before: float, limit: int = BATCH_ROWS, pause: float = PAUSE
) -> int:
    """Delete usage rows whose time is before `before`, window by window; how many."""
    total = 0
    for table, column in USAGE_TIMES:
        after = 0
        while True:
            deleted, last = await window(table, column, after, before, limit)
            total += deleted
            if last is None or deleted == 0:
                break
            after = last
            await asyncio.sleep(pause)
    return total


class Retention:
    """The background task: a pass at start, then one every `interval` seconds."""

    def __init__(
        self,
        window: Window,
        days: int,
        interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._window = window
        self._days = days
        self._interval = interval
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        #: rows deleted since start, and passes finished (for views and tests)
        self.deleted = 0
        self.passes = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                before = self._clock() - self._days * DAY
                deleted = await prune_usage(self._window, before)
                self.deleted += deleted
                self.passes += 1
                if deleted:
                    log.info(
                        "usage retention: deleted %d rows older than %d days", deleted, self._days
                    )
            except Exception:
                log.exception("usage retention failed; it runs again in %g s", self._interval)
            await asyncio.sleep(self._interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class SqliteUsageWindows:
    """`Window` on usage.sqlite: its own connection, used by one worker thread."""

    def __init__(self, usage_path: Path) -> None:
        self._path = usage_path
        self._db: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="pigeonhole-retention")

    async def __call__(
        self, table: str, column: str, after: int, before: float, limit: int
    ) -> tuple[int, int | None]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._thread, self._window, table, column, after, before, limit
        )

    def _window(
        self, table: str, column: str, after: int, before: float, limit: int
    ) -> tuple[int, int | None]:
        if self._db is None:
            self._db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.execute("PRAGMA synchronous=NORMAL")  # the server's sync covers it
        (last,) = self._db.execute(
            f"SELECT max(id) FROM (SELECT id FROM {table} WHERE id > ? ORDER BY id LIMIT ?)",
            (after, limit),
        ).fetchone()
        if last is None:
            return 0, None
        deleted = self._db.execute(
            f"DELETE FROM {table} WHERE id > ? AND id <= ? AND {column} < ?"
            f" AND id < (SELECT max(id) FROM {table})",
            (after, last, before),
        ).rowcount
        return deleted, int(last)

    def close(self) -> None:
        """After the task stopped: the thread finishes its window, then the connection."""
        self._thread.shutdown(wait=True)
        if self._db is not None:
            self._db.close()
            self._db = None


def usage_file_bytes(usage_path: Path) -> int:
    """Bytes the SQLite usage database takes on disk, its write-ahead log included
    (deleted rows leave free pages that new rows reuse: the file does not shrink)."""
    total = 0
    for path in (usage_path, Path(f"{usage_path}-wal")):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(path).st_size
    return total
