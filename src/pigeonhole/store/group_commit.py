"""Group commit: many protocol steps share one durable transaction.

Each `submit` joins the next batch and gets that batch's future. While one batch is
being written on the store's thread, new steps pile into the next one, so under load a
single fsync confirms hundreds of steps, and an idle server commits at once. Batches
commit in order, so a step's future resolving means every earlier step is durable too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pigeonhole.protocol.effects import Effect

log = logging.getLogger("pigeonhole.store")


class GroupCommitter:
    def __init__(
        self,
        write: Callable[[list[Effect]], None],
        on_failure: Callable[[BaseException], None],
        executor: ThreadPoolExecutor,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self._observe = observe
        self._write = write
        self._on_failure = on_failure
        self._executor = executor
        self._pending: list[Effect] = []
        self._next: asyncio.Future[None] | None = None
        self._inflight: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        #: observability: batches and effects committed, and the last commit's seconds
        self.batches = 0
        self.effects = 0
        self.commit_seconds_total = 0.0

    def submit(self, effects: list[Effect]) -> asyncio.Future[None] | None:
        """Queue effects; the returned future resolves once they are committed.

        With no effects this is a barrier: it resolves once everything submitted so far
        is committed, or is None when nothing is outstanding.
        """
        if effects:
            self._pending.extend(effects)
        elif not self._pending:
            if self._inflight is not None and not self._inflight.done():
                return self._inflight
            return None
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
            self._next.add_done_callback(_consume_exception)
        if self._task is None:
            self._task = loop.create_task(self._run())
        return self._next

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, future = self._pending, self._next
                assert future is not None
                self._pending, self._next = [], None
                self._inflight = future
                started = loop.time()
                try:
                    await loop.run_in_executor(self._executor, self._write, batch)
                except Exception as err:
                    log.error("commit failed: %s", err)
                    future.set_exception(err)
                    self._fail_pending(err)
                    self._on_failure(err)
                    return
                self.batches += 1
                self.effects += len(batch)
                elapsed = loop.time() - started
                self.commit_seconds_total += elapsed
                if self._observe is not None:
                    self._observe(elapsed)
                future.set_result(None)
        finally:
            self._task = None

    def _fail_pending(self, err: BaseException) -> None:
        """Steps queued behind a failed batch were decided on state now rolled back."""
        if self._next is not None:
            self._next.set_exception(err)
        self._pending, self._next = [], None

    async def drain(self) -> None:
        """Wait until everything submitted so far is committed (or failed)."""
        while self._task is not None:
            await asyncio.wait({self._task})


def _consume_exception(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
