"""Rounds in slices (server/turns.py `Turn`), as a node's touches of its readers' mailboxes
use them: each mailbox read when a round begins is touched once in it, a share at each
tick as the time goes, a round begins no sooner than `every` seconds after the last
began, and a mailbox no longer read is skipped."""

from __future__ import annotations

from typing import Any

from pigeonhole.server.node.subscriptions import Key, Subscriptions
from pigeonhole.server.turns import Turn


class Reader:
    """A connection as the subscriptions see it."""


def _subscriptions(count: int) -> tuple[Subscriptions, list[Any]]:
    subs = Subscriptions(lambda *_: None)
    readers = [Reader() for _ in range(count)]
    for n, reader in enumerate(readers):
        subs.pending(reader, ("app", f"m{n}"))
    return subs, readers


def test_each_mailbox_once_a_turn_in_shares_of_the_time() -> None:
    subs, _ = _subscriptions(100)
    turn, every = Turn[Key](), 4.0
    slices = [turn.slice(subs.keys, subs.holds, t, every) for t in (10.0, 11.0, 12.0, 13.0, 14.0)]
    assert [len(s) for s in slices] == [1, 25, 25, 25, 24]  # a tick a quarter of `every`
    touched = [key for s in slices for key in s]
    assert sorted(touched) == sorted(subs.keys())  # each once
    # the next round: 4.5 s after the first began
    assert len(turn.slice(subs.keys, subs.holds, 14.5, every)) == 1


def test_a_turn_waits_its_period_and_skips_who_left() -> None:
    subs, readers = _subscriptions(8)
    turn, every = Turn[Key](), 10.0
    assert [len(turn.slice(subs.keys, subs.holds, t, every)) for t in (0.0, 5.0, 9.0)] == [1, 4, 3]
    # done, and not yet 10 s since it began
    assert turn.slice(subs.keys, subs.holds, 9.5, every) == []
    second = [turn.slice(subs.keys, subs.holds, 10.0, every)]
    subs.drop(readers[0])  # gone in the middle of the turn
    second.append(turn.slice(subs.keys, subs.holds, 30.0, every))  # a late tick takes the rest
    keys = [key for s in second for key in s]
    assert ("app", "m0") not in keys and sorted(keys) == sorted(subs.keys())
