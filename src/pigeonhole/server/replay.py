"""Replayed message bodies from the store, read off the event loop.

On `open` the protocol replays the mailbox's messages; a body no longer in the body
cache (protocol/bodies.py) is read from the store here. The read runs in one worker
thread on its own read-only connection (SQLite lets other threads run while it reads),
so a replay of a full mailbox does not stall other connections. It first waits for the
commits outstanding when the `open` came: a body still in a batch being written is not
readable until that batch is. The connection holds the replay, and whatever it queues
after, until the bodies are in (server/connection.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pigeonhole.store.group_commit import Commit
from pigeonhole.store.sqlite import BodyReader

Frame = dict[str, Any]


class BodyLoader:
    def __init__(self, channel_path: Path) -> None:
        self._reader = BodyReader(channel_path)
        self._executor: ThreadPoolExecutor | None = None
        #: replays that needed the store
        self.loads = 0

    async def fill(
        self, app_id: str, mailbox_id: str, frames: dict[int, Frame], after: Commit | None
    ) -> None:
        """Set each frame's `body` from the store; LookupError if one is gone."""
        if after is not None:
            with contextlib.suppress(Exception):  # a failed commit is written again
                await after
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="pigeonhole-bodies")
        loop = asyncio.get_running_loop()
        bodies = await loop.run_in_executor(self._executor, self._reader.read, app_id, mailbox_id)
        self.loads += 1
        for seq, frame in frames.items():
            body = bodies.get(seq)
            if body is None:  # deleted meanwhile (every side closed it elsewhere)
                raise LookupError(f"message {seq} of a replay is no longer stored")
            frame["body"] = body

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._reader.close()
