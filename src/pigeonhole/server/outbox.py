"""A connection's ordered output: each frame waits for the commit it depends on.

Replies leave strictly in the order they were queued. A reply queued with a commit
future (a barrier) is held until that commit is durable (the protocol spec: no direct response
before its side effects are committed); since commits resolve in order, holding never
reorders. A frame with nothing to wait for, behind nothing held, is written at once.

Other sides' messages (`deliver`) are nobody's confirmation, so they do not queue behind
this client's replies waiting for the disk: they leave at once. The client sees what it
would have seen had the other side's `add` been served just before its own pending
commands, which commute with it (an `add` changes nothing but the mailbox's messages).
Clients tell their own echoes from their peers' messages by `side` (the Python client,
wormhole-william). Mailbox order is kept: a message never overtakes a held replay of the
mailbox (a reply marked `pin`); it queues behind it instead.

There is no task per connection: frames are written synchronously into the transport's
buffer, and held frames are released by one callback on the barrier they wait for, so a
group commit costs one callback per connection it answers, not a task switch per frame.
The frames one release lets go leave in one write (`FrameSink.begin`/`end`). A commit
calls those callbacks a few per loop iteration (store/group_commit.py says why); a frame
queued with a barrier that is done while this connection's callback is still to come
waits behind what is held, so order is kept.
The transport's buffer is the send queue: a client that stops reading shows as a growing
buffer, and `behind()` lets the server drop it (too many bytes, or behind for too long)
without anyone waiting on it. Only connections a write left over BEHIND_BYTES are asked
(server/websocket.py `flush` tells the connection table), so an idle crowd costs the
periodic sweep nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from pigeonhole.store.group_commit import Commit

log = logging.getLogger("pigeonhole.outbox")

Frame = dict[str, Any]
Barrier = Commit | None

#: a transport buffer above this many bytes means the client is not keeping up
BEHIND_BYTES = 64 * 1024


class FrameSink(Protocol):
    """Where frames go: a WebSocket that batches writes between `begin` and `end`."""

    @property
    def open(self) -> bool: ...

    def send_text(self, data: bytes) -> None: ...

    def begin(self) -> None: ...

    def end(self) -> None: ...

    def write_buffer_size(self) -> int: ...


class Outbox:
    __slots__ = (
        "_clock",
        "_emptied",
        "_held",
        "_max_buffered",
        "_max_frames",
        "_on_slow",
        "_pinned",
        "_sink",
        "_watching",
        "behind_since",
        "overflowed",
    )

    def __init__(
        self,
        sink: FrameSink,
        clock: Callable[[], float] = time.time,
        *,
        max_frames: int = 1024,
        max_buffered_bytes: int = 16 * 1024 * 1024,
        on_slow: Callable[[], None] | None = None,
    ) -> None:
        self._sink = sink
        self._clock = clock
        self._max_frames = max_frames
        self._max_buffered = max_buffered_bytes
        self._on_slow = on_slow
        #: frames waiting for their commit, in order (made when one must wait, dropped
        #: when emptied: an empty deque costs 600 bytes on every idle connection)
        self._held: deque[tuple[Frame, Barrier, bool]] | None = None
        #: held frames that other sides' messages must not overtake (see `deliver`)
        self._pinned = 0
        #: the barrier whose completion will release the front of `_held`
        self._watching: Commit | None = None
        self._emptied: asyncio.Future[None] | None = None
        #: set once the client was found too slow, or a commit failed: nothing more is sent
        self.overflowed = False
        #: monotonic time since which the transport buffer has been over BEHIND_BYTES
        self.behind_since: float | None = None

    def put(self, frame: Frame, barrier: Barrier = None, *, pin: bool = False) -> None:
        """Queue a reply; `pin` keeps later `deliver`ed messages behind it (a replay)."""
        if self.overflowed:
            return
        held = self._held
        if not held and (barrier is None or barrier.done()):
            if barrier is not None and barrier.exception() is not None:
                self._stop()  # given up (a stop while storage failed): nothing more is sent
                return
            self._send(frame)
            return
        if held is None:
            held = self._held = deque()
        elif len(held) >= self._max_frames:
            self.drop_slow_reader()
            return
        held.append((frame, barrier, pin))
        if pin:
            self._pinned += 1
        if self._watching is None:
            self._watch()

    def deliver(self, frame: Frame) -> None:
        """Send another side's message now, or behind a held replay of the mailbox."""
        if self._pinned:
            self.put(frame, None, pin=True)
        elif not self.overflowed:
            self._send(frame)

    def __len__(self) -> int:
        return len(self._held) if self._held is not None else 0

    def _watch(self) -> None:
        """Release the front of `_held` when its barrier completes."""
        assert self._held
        barrier = self._held[0][1]
        if barrier is None or barrier.done():
            self._release(None)
        else:
            self._watching = barrier
            barrier.add_done_callback(self._release)

    def _release(self, _done: Commit | None) -> None:
        self._watching = None
        held = self._held
        if held is None:
            return
        self._sink.begin()
        try:
            while held and not self.overflowed:
                frame, barrier, pin = held[0]
                if barrier is not None and not barrier.done():
                    self._watching = barrier
                    barrier.add_done_callback(self._release)
                    return
                held.popleft()
                if pin:
                    self._pinned -= 1
                if barrier is not None and barrier.exception() is not None:
                    self._stop()  # given up (a stop while storage failed): nothing more is sent
                    return
                self._send(frame)
        finally:
            self._sink.end()
        if held:
            return
        # emptied: give the deque back (acks wait too, so nearly every connection holds
        # a frame once, and an idle one would keep 600 bytes for nothing)
        if self._held is held:
            self._held = None
        if self._emptied is not None and not self._emptied.done():
            self._emptied.set_result(None)

    def _send(self, frame: Frame) -> None:
        sink = self._sink
        if not sink.open:
            return
        try:
            data = orjson.dumps({**frame, "server_tx": self._clock()})
        except TypeError:
            log.exception("cannot encode a %s frame; dropped", frame.get("type"))
            return
        # written into the transport's buffer at once (or at the batch's end); `behind()`
        # watches that buffer for a client that does not read
        sink.send_text(data)
        if sink.write_buffer_size() > self._max_buffered:
            self.drop_slow_reader()

    def behind(self, now: float, timeout: float) -> bool:
        """True if the client has not kept up for `timeout` seconds (checked periodically)."""
        if self.overflowed:
            return False
        size = self._sink.write_buffer_size()
        if size <= BEHIND_BYTES:
            self.behind_since = None
            return False
        if self.behind_since is None:
            self.behind_since = now
        return now - self.behind_since >= timeout

    def drop_slow_reader(self) -> None:
        if self.overflowed:
            return
        on_slow = self._on_slow  # (stopping lets go of it)
        self._stop()
        if on_slow is not None:
            on_slow()

    def _stop(self) -> None:
        self.overflowed = True
        self.stop()

    async def flush(self, timeout: float) -> None:
        """Wait (bounded) until every held frame has been written."""
        if not self._held:
            return
        if self._emptied is None or self._emptied.done():
            self._emptied = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._emptied), timeout)

    def stop(self) -> None:
        """The connection ended: drop what is still held (and the connection's callback,
        which would keep the two in a reference cycle)."""
        self._held = None
        self._pinned = 0
        self._on_slow = None
        if self._emptied is not None and not self._emptied.done():
            self._emptied.set_result(None)
