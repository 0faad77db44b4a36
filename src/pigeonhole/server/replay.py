"""Replayed message bodies from the store, read off the event loop's critical path.

On `open` the protocol replays the mailbox's messages; a body no longer in the body
cache (protocol/bodies.py) is read from the store here. It first waits for the commits
outstanding when the `open` came: a body still in a batch being written is not readable
until that batch is. The connection holds the replay, and whatever it queues after,
until the bodies are in (server/connection.py).

How a store reads is its own (server/storage.py): SQLite in one worker thread on its
own read-only connection (SQLite lets other threads run while it reads), so a replay of
a full mailbox does not stall other connections; PostgreSQL with an async query.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from pigeonhole.store.group_commit import Commit

Frame = dict[str, Any]
#: (app_id, mailbox_id, the messages' sequence numbers) -> their stored bodies as hex,
#: by sequence number (those of the mailbox only)
ReadBodies = Callable[[str, str, list[int]], Awaitable[dict[int, str]]]


class BodyLoader:
    def __init__(self, read: ReadBodies) -> None:
        self._read = read
        #: replays that needed the store
        self.loads = 0

    async def fill(
        self, app_id: str, mailbox_id: str, frames: dict[int, Frame], after: Commit | None
    ) -> None:
        """Set each frame's `body` from the store; LookupError if one is gone."""
        if after is not None:
            with contextlib.suppress(Exception):  # a failed commit is written again
                await after
        bodies = await self._read(app_id, mailbox_id, list(frames))
        self.loads += 1
        for seq, frame in frames.items():
            body = bodies.get(seq)
            if body is None:  # deleted meanwhile (every side closed it elsewhere)
                raise LookupError(f"message {seq} of a replay is no longer stored")
            frame["body"] = body
