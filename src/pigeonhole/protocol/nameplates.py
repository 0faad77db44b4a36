"""Nameplate validation and the shortest-free allocation policy (randomness passed in)."""

from __future__ import annotations

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


#: the short nameplates by length as (number, string), made once: allocation scans them
_SHORT = tuple(
    tuple((n, str(n)) for n in range(low, high)) for low, high in ((1, 10), (10, 100), (100, 1000))
)


def find_free_nameplate(in_use: Collection[str], choose: Choose, randbelow: RandBelow) -> str:
    """The shortest free number: 1-9, then 10-99, then 100-999, then random 1000-999999."""
    for names in _SHORT:
        free = [n for n, name in names if name not in in_use]
        if free:
            return str(choose(free))
    for _ in range(1000):
        candidate = str(1000 + randbelow(1000000 - 1000))
        if candidate not in in_use:
            return candidate
    raise ProtocolError(NO_FREE_NAMEPLATE)
