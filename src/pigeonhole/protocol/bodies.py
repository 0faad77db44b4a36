"""A bounded cache of recent message bodies (hex, as sent), by message sequence number.

The store holds every body; memory holds only this cache, so the heap does not grow with
what is stored. Most bodies are read once, seconds after they were added, by the other
side's `open` replay: a cache of recent small bodies serves those without a database
read. Big bodies are not cached at all (a flood of 1 MiB bodies would only churn it),
and the oldest entries go first when it is full. A body missing here is read from the
store (server/replay.py), after waiting for the commits that may still hold it.
"""

from __future__ import annotations

#: default budget, in hex characters (one byte each in CPython's compact ASCII strings)
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024
#: hex bodies longer than this are never cached (32 KiB decoded)
DEFAULT_MAX_ITEM = 64 * 1024


class BodyCache:
    __slots__ = ("_bodies", "_max_bytes", "_max_item", "size")

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, max_item: int = DEFAULT_MAX_ITEM):
        self._bodies: dict[int, str] = {}
        self._max_bytes = max_bytes
        self._max_item = min(max_item, max_bytes)
        #: hex characters held
        self.size = 0

    def __len__(self) -> int:
        return len(self._bodies)

    def put(self, seq: int, body: str) -> None:
        if len(body) > self._max_item:
            return
        self._bodies[seq] = body
        self.size += len(body)
        bodies = self._bodies
        while self.size > self._max_bytes:
            # dicts keep insertion order: the first key is the oldest body
            oldest = next(iter(bodies))
            self.size -= len(bodies.pop(oldest))

    def get(self, seq: int) -> str | None:
        return self._bodies.get(seq)

    def drop(self, seq: int) -> None:
        body = self._bodies.pop(seq, None)
        if body is not None:
            self.size -= len(body)
