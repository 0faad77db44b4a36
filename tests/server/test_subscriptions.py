"""A node's readers across an `open`'s replay and the live messages (server/node/)."""

from __future__ import annotations

from typing import Any

from pigeonhole.server.node.subscriptions import Subscriptions

KEY = ("app", "mbox")


def _frame(seq: int) -> dict[str, Any]:
    return {"type": "message", "phase": str(seq)}


def _setup() -> tuple[Subscriptions, list[tuple[str, int]]]:
    sent: list[tuple[str, int]] = []
    subs = Subscriptions(lambda conn, frame: sent.append((conn, int(frame["phase"]))))
    return subs, sent


def test_messages_during_the_open_are_held_then_sent_above_the_replay() -> None:
    subs, sent = _setup()
    subs.pending("reader", KEY)
    subs.message(KEY, 3, None, _frame(3))  # was in the replay already
    subs.message(KEY, 5, None, _frame(5))  # committed after the open
    assert sent == []
    subs.go_live("reader", 3)
    assert sent == [("reader", 5)]
    subs.message(KEY, 5, None, _frame(5))  # never twice
    subs.message(KEY, 6, None, _frame(6))
    assert sent == [("reader", 5), ("reader", 6)]


def test_the_senders_own_connection_is_skipped_but_counted() -> None:
    subs, sent = _setup()
    for conn in ("a", "b"):
        subs.pending(conn, KEY)
        subs.go_live(conn, 0)
    subs.message(KEY, 1, "a", _frame(1))  # a's own: it had its echo after the commit
    assert sent == [("b", 1)]
    subs.message(KEY, 2, None, _frame(2))
    assert sent == [("b", 1), ("a", 2), ("b", 2)]


def test_other_mailboxes_and_dropped_readers_get_nothing() -> None:
    subs, sent = _setup()
    subs.pending("a", KEY)
    subs.go_live("a", 0)
    subs.pending("b", ("app", "other"))
    subs.go_live("b", 0)
    subs.drop("a")
    subs.message(KEY, 1, None, _frame(1))
    assert sent == [] and len(subs) == 1 and subs.keys() == [("app", "other")]
    subs.pending("b", KEY)  # a new open replaces the old subscription
    assert subs.keys() == [KEY]
