"""Group commit: many protocol steps share one transaction and one fsync.

Each `submit` joins the current batch and gets that batch's future. The batch is written
once per event-loop iteration, on the loop's own thread: one SQLite transaction for every
step of the iteration, cheap because SQLite does not sync here (`synchronous=NORMAL`).
Durability comes from the second half: a worker thread fdatasyncs the write-ahead logs,
and only then do the batches written before that sync resolve. While one sync runs, new
batches are written and wait for the next one, so under load one fsync confirms hundreds
of steps, and an idle server syncs at once.

Why split it: writing on the loop thread avoids handing the GIL to a database thread for
every statement (which made each commit wait on the busy loop), and syncing in a thread
keeps a slow disk from stalling the loop. Batches resolve in order, so a step's future
resolving means every earlier step is durable too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pigeonhole.protocol.effects import Effect

log = logging.getLogger("pigeonhole.store")


class GroupCommitter:
    def __init__(
        self,
        write: Callable[[list[Effect]], None],
        sync: Callable[[], None],
        on_failure: Callable[[BaseException], None],
        executor: ThreadPoolExecutor,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self._write = write
        self._sync = sync
        self._on_failure = on_failure
        self._executor = executor
        self._observe = observe
        #: effects of the batch being gathered, and its future
        self._pending: list[Effect] = []
        self._next: asyncio.Future[None] | None = None
        self._next_started = 0.0
        self._flush_scheduled = False
        #: batches written, waiting for a sync: (future, submitted at)
        self._written: list[tuple[asyncio.Future[None], float]] = []
        self._syncing: asyncio.Task[None] | None = None
        self._last: asyncio.Future[None] | None = None
        #: observability: batches and effects committed, and the time spent committing
        self.batches = 0
        self.effects = 0
        self.commit_seconds_total = 0.0

    def submit(self, effects: list[Effect]) -> asyncio.Future[None] | None:
        """Queue effects; the returned future resolves once they are durable.

        With no effects this is a barrier: it resolves once everything submitted so far
        is durable, or is None when nothing is outstanding.
        """
        if not effects:
            if self._next is not None:
                return self._next
            last = self._last
            return last if last is not None and not last.done() else None
        self._pending.extend(effects)
        if self._next is None:
            loop = asyncio.get_running_loop()
            self._next = loop.create_future()
            self._next.add_done_callback(_consume_exception)
            self._next_started = time.perf_counter()
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return self._next

    def _flush(self) -> None:
        """Write the gathered batch as one transaction (no sync yet)."""
        self._flush_scheduled = False
        batch, future, started = self._pending, self._next, self._next_started
        self._pending, self._next = [], None
        if future is None or not batch:
            return
        self._last = future
        try:
            self._write(batch)
        except Exception as err:
            log.error("commit failed: %s", err)
            future.set_exception(err)
            self._on_failure(err)
            return
        self.batches += 1
        self.effects += len(batch)
        self._written.append((future, started))
        if self._syncing is None:
            self._syncing = asyncio.get_running_loop().create_task(self._sync_written())

    async def _sync_written(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._written:
                synced, self._written = self._written, []
                try:
                    await loop.run_in_executor(self._executor, self._sync)
                except Exception as err:
                    log.error("sync failed: %s", err)
                    for future, _ in synced + self._written:
                        future.set_exception(err)
                    self._written = []
                    self._on_failure(err)
                    return
                now = time.perf_counter()
                for future, started in synced:
                    elapsed = now - started
                    self.commit_seconds_total += elapsed
                    if self._observe is not None:
                        self._observe(elapsed)
                    future.set_result(None)
        finally:
            self._syncing = None

    async def drain(self) -> None:
        """Wait until everything submitted so far is durable (or failed)."""
        while self._next is not None or self._syncing is not None or self._written:
            if self._next is not None:
                await asyncio.wait({self._next})
            elif self._syncing is not None:
                await asyncio.wait({self._syncing})
            else:
                await asyncio.sleep(0)


def _consume_exception(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
