"""Group commit: many protocol steps share one transaction and one fsync.

Each `submit` joins the current batch and gets that batch's `Commit`. A batch is written
as one SQLite transaction, cheap because SQLite does not sync then
(`synchronous=NORMAL`). Durability comes from the second half: the write-ahead logs are
fdatasynced, and only then does the batch resolve (where each half runs: below). One
batch is in the works at a time; what is submitted meanwhile gathers into the next
batch, written the moment the running one is durable, so under load one transaction and
one fsync confirm hundreds of steps, and an idle server writes and syncs at once (in the
next loop iteration).

Why one transaction per sync, not per loop iteration: every transaction rewrites each
B-tree page it touches into the log (4 KiB a page, some ten tables and indexes), so the
fewer transactions, the fewer log bytes and system calls per step; a step waits for the
running sync either way.

Why split write and sync (the `thread` mode, below): writing on the loop thread
avoids handing the GIL to a database thread for every statement, and syncing in a thread
keeps a slow disk from stalling the loop. Batches resolve in order, so a step's commit
resolving means every earlier step is durable too.

Where the write and the sync run (`serve --commit-sync`) is the `Syncer`'s business:
- `process` (the default): the helper process of store/sqlite/helper.py does both; the loop
  sends it the batch through a pipe and hears back as from any socket: no SQLite work on
  the loop, no GIL hand-off;
- `thread` (`LocalSyncer` with an executor): written on the loop, synced by a worker
  thread, whose completion needs the GIL back from the busy loop and comes round by
  `call_soon_threadsafe`;
- `loop` (`LocalSyncer` without one): the sync runs on the loop's thread right after the
  write: the loop waits for the disk, and transactions are per loop iteration, so
  throughput drops, but replies leave right after the sync.

Latency is counted in loop iterations: a `Commit` calls its callbacks synchronously when
the sync's completion reaches the loop, so replies leave in that same iteration (an
asyncio future would schedule each callback for a later one). But not all of them: a
batch under load confirms the steps of some 50-100 connections, and releasing all their
replies in one callback would keep every socket unread meanwhile (p50 1.0, p99 3.7 ms),
and a peer's message would wait that long. So a durable batch releases
`RELEASE_PER_ITERATION` connections' replies per loop iteration, the socket reads that are
ready in between (and the messages they forward) coming first: at 100 exchanges in flight
the message p99 is 2.5-3.5 ms against 5.8-6.8 ms with all replies at once, for about 9%
fewer exchanges/s (bench/README.md).

A batch that fails (disk full, an I/O error, the helper gone) is rolled back whole, so
it is written again, after a pause that doubles from `RETRY_FIRST` up to `RETRY_MAX`,
until it succeeds: memory (which already holds its changes) and disk agree again, and no
reply that waits for it is lost or sent early. Nothing later is written before it, so
order holds. Meanwhile the server refuses new writes (`on_failure`, `on_recovered`), and
the replies held for the failed batch simply wait: no connection is closed. Only a stop
gives up on it (`abandon`), failing what waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from pigeonhole.protocol.effects import Effect

log = logging.getLogger("pigeonhole.store")

#: a durable batch's waiters released per loop iteration (see the module's docstring)
RELEASE_PER_ITERATION = 4
#: seconds before a failed batch is written again: doubling from the first to the max
RETRY_FIRST = 0.05
RETRY_MAX = 2.0


class Commit:
    """The durability of one batch: done once synced, or failed with the error.

    Like a future, but callbacks run synchronously on resolution (or a few per loop
    iteration, `resolve(per_iteration=...)`); awaitable.
    """

    __slots__ = ("_callbacks", "_done", "_error", "_waiter", "started")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[Commit], object]] = []
        self._done = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.started = time.perf_counter()

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._error

    def add_done_callback(self, callback: Callable[[Commit], object]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def resolve(self, error: BaseException | None = None, per_iteration: int = 0) -> None:
        """Done (or failed): call back every waiter now, or `per_iteration` at a time.

        With `per_iteration`, the first ones are called now and the rest in later loop
        iterations, in order; the commit is done for everyone from now on (a waiter added
        meanwhile is called at once).
        """
        if self._done:
            return
        self._done, self._error = True, error
        callbacks, self._callbacks = self._callbacks, []
        self._call_back(callbacks, 0, per_iteration)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
                # seen here: an awaiter that gave up (a drain's timeout) leaves no one to
                # retrieve it, and asyncio would log it as lost when the future is collected
                waiter.exception()

    def _call_back(
        self, callbacks: list[Callable[[Commit], object]], start: int, per_iteration: int
    ) -> None:
        end = len(callbacks)
        if 0 < per_iteration < end - start:
            end = start + per_iteration
            asyncio.get_running_loop().call_soon(self._call_back, callbacks, end, per_iteration)
        for i in range(start, end):
            try:
                callbacks[i](self)
            except Exception:
                log.exception("commit callback failed")

    def __await__(self) -> Generator[Any, None, None]:
        if not self._done:
            if self._waiter is None:
                self._waiter = asyncio.get_running_loop().create_future()
            # shielded: a cancelled awaiter must not cancel the future every other
            # awaiter of this batch shares (the drain at shutdown is one of them)
            yield from asyncio.shield(self._waiter).__await__()
        if self._error is not None:
            raise self._error


Done = Callable[[BaseException | None], None]


class Syncer(Protocol):
    """Writes and syncs a batch; `done(error)` comes on the loop's thread."""

    def start(self, effects: list[Effect], done: Done) -> None:
        """Make `effects` one durable transaction, after every batch started before."""


class LocalSyncer:
    """`thread` and `loop`: the write on the loop's thread, the sync in `executor` or not."""

    def __init__(
        self,
        write: Callable[[list[Effect]], None],
        sync: Callable[[], None],
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        self._write = write
        self._sync = sync
        self._executor = executor

    def start(self, effects: list[Effect], done: Done) -> None:
        try:
            self._write(effects)
        except Exception as err:  # rolled back: nothing to sync
            done(err)
            return
        if self._executor is None:  # on the loop's thread: no hand-off, the loop waits
            error: BaseException | None = None
            try:
                self._sync()
            except Exception as err:
                error = err
            done(error)
            return
        loop = asyncio.get_running_loop()
        job = self._executor.submit(self._sync)
        job.add_done_callback(lambda job: loop.call_soon_threadsafe(done, job.exception()))


class GroupCommitter:
    def __init__(
        self,
        syncer: Syncer,
        on_failure: Callable[[BaseException], None],
        observe: Callable[[float], None] | None = None,
        on_recovered: Callable[[], None] | None = None,
    ) -> None:
        self._syncer = syncer
        self._on_failure = on_failure
        self._on_recovered = on_recovered
        self._observe = observe
        #: the effects of the batch the running sync covers (kept to write it again)
        self._syncing_effects: list[Effect] = []
        #: a failed batch waiting to be written again, and the timer that will do it
        self._failed: tuple[list[Effect], Commit] | None = None
        self._retry: asyncio.TimerHandle | None = None
        #: failures in a row (0 when the last batch succeeded)
        self.failing = 0
        #: effects of the batch being gathered, and its commit
        self._pending: list[Effect] = []
        self._next: Commit | None = None
        #: the batch the running sync covers (None: no sync running)
        self._syncing: Commit | None = None
        self._last: Commit | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: observability: batches and effects committed, and the time spent committing
        self.batches = 0
        self.effects = 0
        self.commit_seconds_total = 0.0

    def submit(self, effects: list[Effect]) -> Commit | None:
        """Queue effects; the returned commit resolves once they are durable.

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
            self._next = Commit()
            if self._syncing is None:  # else the running sync's end writes this batch
                if self._loop is None:
                    self._loop = asyncio.get_running_loop()
                self._loop.call_soon(self._flush)
        return self._next

    def _flush(self) -> None:
        """Hand the gathered batch to the syncer: one transaction, then its sync."""
        if self._syncing is not None or self._failed is not None:
            return  # written when the running sync ends, or after the failed batch
        batch, commit = self._pending, self._next
        self._pending, self._next = [], None
        if commit is None:
            return
        self._last = commit
        self.batches += 1
        self.effects += len(batch)
        self._start(batch, commit)

    def _start(self, batch: list[Effect], commit: Commit) -> None:
        self._syncing, self._syncing_effects = commit, batch
        self._syncer.start(batch, self._synced)  # `_synced` may come before it returns

    def _synced(self, error: BaseException | None) -> None:
        commit, self._syncing = self._syncing, None
        batch, self._syncing_effects = self._syncing_effects, []
        assert commit is not None
        if error is not None:
            # rolled back whole: written again later, before anything gathered meanwhile
            self.failing += 1
            self._failed = (batch, commit)
            delay = min(RETRY_MAX, RETRY_FIRST * 2 ** (self.failing - 1))
            loop = self._loop or asyncio.get_running_loop()
            self._retry = loop.call_later(delay, self._write_again)
            self._on_failure(error)
            return
        if self.failing:
            self.failing = 0
            if self._on_recovered is not None:
                self._on_recovered()
        elapsed = time.perf_counter() - commit.started
        self.commit_seconds_total += elapsed
        if self._observe is not None:
            self._observe(elapsed)
        commit.resolve(per_iteration=RELEASE_PER_ITERATION)
        # what gathered during the sync is written now, after the first slice of replies
        if self._next is not None:
            self._flush()

    def _write_again(self) -> None:
        self._retry = None
        failed, self._failed = self._failed, None
        if failed is not None:
            self._start(*failed)

    def abandon(self, error: BaseException) -> None:
        """Give up on a failed batch and everything gathered behind it (when stopping)."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        failed, self._failed = self._failed, None
        gathered, self._next, self._pending = self._next, None, []
        if failed is not None:
            failed[1].resolve(error)
        if gathered is not None:
            gathered.resolve(error)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is durable; False if `timeout` ran out."""
        try:
            await asyncio.wait_for(self._drain(), timeout)
        except TimeoutError:
            return False
        return True

    async def _drain(self) -> None:
        while True:
            commit = self.submit([])
            if commit is None:
                return
            try:
                await commit
            except Exception:
                return
