"""Group commit for the archive: many posts share one durable transaction.

`add(rows)` joins the next batch and resolves, with the new rows and bytes, once the
transaction holding them has committed. While one batch is being written on the store's
writer thread, newer units pile up for the next, so under load one fsync confirms many
posts and an idle server commits at once (design notes, rule 8 refinement).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pigeonhole.archive.store import ArchiveStore, NewRow

#: (rows written, bytes written) of one unit: duplicates are neither
Added = tuple[int, int]
_Unit = tuple[Sequence[NewRow], "asyncio.Future[Added]"]


class GroupWriter:
    def __init__(self, store: ArchiveStore, executor: ThreadPoolExecutor) -> None:
        self._store = store
        self._executor = executor
        self._pending: list[_Unit] = []
        self._task: asyncio.Task[None] | None = None
        #: transactions committed, for observability
        self.commits = 0

    async def add(self, rows: Sequence[NewRow]) -> Added:
        """Wait until `rows` are committed; return how many (and bytes) were new."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Added] = loop.create_future()
        self._pending.append((rows, future))
        if self._task is None:
            self._task = loop.create_task(self._run())
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                units = [rows for rows, _ in batch]
                try:
                    counts = await loop.run_in_executor(
                        self._executor, self._store.add_units, units
                    )
                except Exception as err:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(err)
                    continue
                self.commits += 1
                for (_, future), count in zip(batch, counts, strict=True):
                    if not future.done():
                        future.set_result(count)
        finally:
            self._task = None

    async def drain(self) -> None:
        """Wait for everything submitted so far to be committed (or to fail)."""
        while self._task is not None:
            await asyncio.wait({self._task})
