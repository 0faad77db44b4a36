"""Usage results, blur, and pruning of the shared state."""

from __future__ import annotations

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.usage import blur, mailbox_result, nameplate_result


@pytest.mark.parametrize(
    ("sides", "moods", "pruned", "expected"),
    [
        (0, [], True, "pruney"),
        (0, [], False, "quiet"),
        (1, [None], False, "lonely"),
        (2, ["happy", "happy"], False, "happy"),
        (2, ["happy", "lonely"], False, "lonely"),
        (2, ["errory", "lonely"], False, "errory"),
        (2, ["errory", "scary"], False, "scary"),
        (2, ["scary", "happy"], True, "pruney"),
        (3, ["happy", "happy", None], True, "crowded"),
        (2, ["unwelcome", "happy"], False, "happy"),
    ],
)
def test_mailbox_result(sides: int, moods: list[str | None], pruned: bool, expected: str) -> None:
    """Mood precedence lonely < errory < scary < pruney < crowded, as the reference."""
    assert mailbox_result(sides, moods, pruned) == expected


@pytest.mark.parametrize(
    ("sides", "pruned", "expected"),
    [(1, False, "lonely"), (2, False, "happy"), (2, True, "pruney"), (3, True, "crowded")],
)
def test_nameplate_result(sides: int, pruned: bool, expected: str) -> None:
    """Nameplate results: happy with two sides, else lonely; pruney; crowded wins."""
    assert nameplate_result(sides, pruned) == expected


def test_blur_rounds_down() -> None:
    """--blur-usage rounds down to a multiple of the blur."""
    assert blur(7205.5, 3600) == 7200.0
    assert blur(7205.5, None) == 7205.5


def test_prune_old_unsubscribed_only(rz: Rendezvous) -> None:
    """Idle channels are pruned with usage rows; subscribed ones are kept alive."""
    out: list[fx.Effect] = []
    rz.claim("app", "1", "a", 0.0, out)
    kept = rz.open("app", "live", "b", 0.0, out)
    kept.subscribers[object()] = None
    rz.claim("app", "2", "c", 500.0, out)
    out.clear()
    assert rz.prune(700.0, 660.0, out) == 1
    assert sorted(rz.apps["app"].nameplates) == ["2"]
    assert "live" in rz.apps["app"].mailboxes
    results = sorted((type(e).__name__, e.result) for e in out if hasattr(e, "result"))
    assert results == [("UsageMailbox", "pruney"), ("UsageNameplate", "pruney")]
    # the subscribed mailbox was touched: still there long after, while subscribed
    assert rz.prune(5000.0, 660.0, out) == 1  # "2" goes now
    assert "live" in rz.apps["app"].mailboxes


def test_pruned_apps_leave_memory(rz: Rendezvous) -> None:
    """Nothing pruned stays in memory (the reference leaks Mailbox objects)."""
    out: list[fx.Effect] = []
    rz.claim("app", "1", "a", 0.0, out)
    rz.prune(1000.0, 660.0, out)
    assert rz.apps == {}
