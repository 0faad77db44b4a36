"""Rounds over a changing set, a slice at each tick (`Turn`).

Work that must reach every member of a big set once per period (a ping to each quiet
connection, a touch of each read mailbox) done all at once comes as a burst: beside a
crowd of 15,000 it stalls the exchanges in flight and lands in whichever second it falls
in. A turn spreads it: each tick takes the share of the round that the time since the
last tick is of the period, so the work per second stays even.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Turn(Generic[T]):
    """One round at a time over the members present when it began: a round begins
    `every` seconds after the last began (or when the last ends, if later), and each
    tick takes its share of it, so a round lasts about `every` and visits each of its
    members once (those gone meanwhile are left out)."""

    def __init__(self) -> None:
        self._left: list[T] = []
        self._size = 0
        self._began = -math.inf
        self._last = -math.inf

    def slice(
        self,
        members: Callable[[], list[T]],
        present: Callable[[T], bool],
        now: float,
        every: float,
    ) -> list[T]:
        """The members this tick visits (`members` is read when a round begins)."""
        if not self._left:
            if now - self._began < every:
                return []
            self._left = members()
            self._size = len(self._left)
            self._began = self._last = now
        share = (now - self._last) / every if every > 0 else 1.0
        take = max(1, math.ceil(self._size * share))
        self._last = now
        taken = self._left[-take:]
        del self._left[-take:]
        return [member for member in taken if present(member)]
