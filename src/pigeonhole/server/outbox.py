"""A connection's ordered output: each frame waits for the commit it depends on.

Frames leave strictly in the order they were queued. A frame queued with a commit
future is held until that commit is durable (spec 002: no direct response before its
side effects are committed); since commits resolve in order, this never reorders.
The queue is bounded: a client that stops reading is closed, never waited on by others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

log = logging.getLogger("pigeonhole.outbox")

Frame = dict[str, Any]
Barrier = asyncio.Future[None] | None

#: close code when a commit this connection waits on failed
CLOSE_INTERNAL_ERROR = 1011


class Outbox:
    def __init__(
        self,
        ws: web.WebSocketResponse,
        clock: Callable[[], float] = time.time,
        *,
        max_frames: int = 256,
        send_timeout: float = 30.0,
        on_slow: Callable[[], None] | None = None,
    ) -> None:
        self._ws = ws
        self._clock = clock
        self._max_frames = max_frames
        self._send_timeout = send_timeout
        self._on_slow = on_slow
        self._queue: deque[tuple[Frame, Barrier]] = deque()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.overflowed = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def put(self, frame: Frame, barrier: Barrier = None) -> None:
        if self.overflowed:
            return
        if len(self._queue) >= self._max_frames:
            self._slow_reader()
            return
        self._queue.append((frame, barrier))
        self._idle.clear()
        self._wakeup.set()

    def __len__(self) -> int:
        return len(self._queue)

    def _slow_reader(self) -> None:
        if self.overflowed:
            return
        self.overflowed = True
        self._queue.clear()
        self._idle.set()
        if self._on_slow is not None:
            self._on_slow()

    async def _run(self) -> None:
        ws = self._ws
        queue = self._queue
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while queue:
                frame, barrier = queue[0]
                if barrier is not None and not barrier.done():
                    await asyncio.wait({barrier})
                if not queue:
                    break  # cleared meanwhile
                queue.popleft()
                if barrier is not None and barrier.exception() is not None:
                    queue.clear()
                    await ws.close(code=CLOSE_INTERNAL_ERROR, message=b"storage failure")
                    break
                if ws.closed:
                    continue
                try:
                    data = orjson.dumps({**frame, "server_tx": self._clock()}).decode()
                except TypeError:
                    log.exception("cannot encode a %s frame; dropped", frame.get("type"))
                    continue
                try:
                    await asyncio.wait_for(ws.send_str(data), self._send_timeout)
                except TimeoutError:
                    queue.clear()
                    self._slow_reader()
                except ConnectionError:
                    queue.clear()
            self._idle.set()

    async def flush(self, timeout: float) -> None:
        """Wait (bounded) until every queued frame has been sent."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
