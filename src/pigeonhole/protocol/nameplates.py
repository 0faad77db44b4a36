"""Nameplate validation and the shortest-free allocation policy (randomness passed in)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection

from pigeonhole.protocol.errors import NO_FREE_NAMEPLATE, ProtocolError

MAX_NAMEPLATE_LENGTH = 40

#: choose(seq) -> one element; randbelow(n) -> 0 <= k < n. `secrets` provides both.
Choose = Callable[[list[int]], int]
RandBelow = Callable[[int], int]


def validate_nameplate(name: object) -> str:
    """Numeric, at most 40 digits (reference 0.7.0); errors reuse its log wording."""
    if not isinstance(name, str):
        raise ProtocolError(f"nameplate {name!r} is {type(name)} not str")
    if not name.isascii() or not name.isdigit():
        raise ProtocolError(f"nameplate {name!r} has non-digits")
    if len(name) > MAX_NAMEPLATE_LENGTH:
        raise ProtocolError(
            f"nameplate {name[:10]!r}.. is too long, {len(name)}>{MAX_NAMEPLATE_LENGTH}"
        )
    return name


#: the short numbers by length (1-9, 10-99, 100-999) as ranges [low, high)
SHORT_LENGTHS = ((1, 10), (10, 100), (100, 1000))
#: each short number's name, and (length index, number) by name: only these exact
#: strings take a short number ("07" is a nameplate of its own; it leaves 7 free)
_SHORT_BY_NAME = {str(n): (k, n) for k, (lo, hi) in enumerate(SHORT_LENGTHS) for n in range(lo, hi)}
#: draws from a length's range before its free numbers are listed (a miss is at most
#: half likely there, so 64 misses happen about once in 2**64 allocations)
DRAWS = 64


class ShortNames:
    """Which short numbers (1-999) an app's nameplates take, kept as they come and go,
    so `allocate` finds the shortest free number without looking at the taken ones.

    Per length it counts the taken numbers. A length at least half free is drawn from
    directly (uniform over its range, a taken draw drawn again: uniform over the free
    ones, two draws expected); a length mostly taken keeps its free numbers in a sorted
    list, chosen from in one step. That list exists only while the length is mostly
    taken, so an app holds at most a few hundred small ints for it, and only an app with
    hundreds of nameplates. Kept by `App` (protocol/channels.py) on every nameplate it
    adds or drops; `find_free_nameplate` checks each answer against the nameplates
    themselves, so a count that went wrong costs time, never a taken name.
    """

    __slots__ = ("free", "long_free", "pinned", "taken")

    def __init__(self) -> None:
        self.taken = [0, 0, 0]
        #: per length, its free numbers in order while it is mostly taken, else None
        self.free: list[list[int] | None] = [None, None, None]
        #: a store that loads rows per batch (store/postgres/shared.py) says what it read:
        #: free lists kept whatever they hold (`pinned`: the names of those lengths are
        #: not all loaded), and long numbers drawn before it read and found free
        self.pinned = False
        self.long_free: list[str] = []

    def add(self, name: str) -> None:
        """A nameplate called `name` now exists."""
        short = _SHORT_BY_NAME.get(name)
        if short is None:
            return
        k, n = short
        self.taken[k] += 1
        free = self.free[k]
        if free is not None:
            i = bisect_left(free, n)
            if i < len(free) and free[i] == n:
                del free[i]

    def remove(self, name: str) -> None:
        """The nameplate called `name` is gone."""
        short = _SHORT_BY_NAME.get(name)
        if short is None:
            return
        k, n = short
        self.taken[k] = max(0, self.taken[k] - 1)
        free = self.free[k]
        if free is not None:
            low, high = SHORT_LENGTHS[k]
            if not self.pinned and 4 * (high - low - self.taken[k]) > 3 * (high - low):
                self.free[k] = None  # mostly free again: drawn from directly
            else:
                i = bisect_left(free, n)
                if i == len(free) or free[i] != n:
                    free.insert(i, n)

    def clear(self) -> None:
        self.taken = [0, 0, 0]
        self.free = [None, None, None]

    def pick(self, in_use: Collection[str], choose: Choose, randbelow: RandBelow) -> str | None:
        """A free number of the shortest length that has one (None: 1-999 all taken)."""
        for k, (low, high) in enumerate(SHORT_LENGTHS):
            size = high - low
            if self.taken[k] >= size:
                continue
            free = self.free[k]
            if free is None and 2 * (size - self.taken[k]) >= size:
                for _ in range(DRAWS):
                    name = str(low + randbelow(size))
                    if name not in in_use:
                        return name
            if free is not None and not free and self.pinned:
                continue  # the store says: none free
            if free is None or not free:
                # listed once (or again, should the counts have gone wrong)
                free = self.free[k] = [n for n in range(low, high) if str(n) not in in_use]
                self.taken[k] = size - len(free)
                if not free:
                    continue
            name = str(choose(free))
            if name in in_use:  # the list went wrong: list again, choose again
                free = self.free[k] = [n for n in range(low, high) if str(n) not in in_use]
                self.taken[k] = size - len(free)
                if not free:
                    continue
                name = str(choose(free))
            return name
        return None


def find_free_nameplate(
    in_use: Collection[str],
    choose: Choose,
    randbelow: RandBelow,
    short: ShortNames | None = None,
) -> str:
    """The shortest free number: 1-9, then 10-99, then 100-999, then random 1000-999999.

    Among the free numbers of the shortest length that has one, each is equally likely
    (the reference's `random.choice`). `short` is what the app keeps of its short
    numbers; without it they are counted from `in_use` first.
    """
    if short is None:
        short = ShortNames()
        for name in in_use:
            short.add(name)
    short_name = short.pick(in_use, choose, randbelow)
    if short_name is not None:
        return short_name
    while short.long_free:  # drawn (uniformly) and found free by the store
        candidate = short.long_free.pop(0)
        if candidate not in in_use:
            return candidate
    for _ in range(1000):
        candidate = str(1000 + randbelow(1000000 - 1000))
        if candidate not in in_use:
            return candidate
    raise ProtocolError(NO_FREE_NAMEPLATE)
