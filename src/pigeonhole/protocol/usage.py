"""Usage summaries of finished nameplates and mailboxes, computed as the reference does (§4.2)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def blur(t: float, blur_time: int | None) -> float:
    """Round a start time down to a multiple of `--blur-usage` seconds."""
    if not blur_time:
        return t
    return float(blur_time * (t // blur_time))


def timing(added: Sequence[float], now: float) -> tuple[float, float | None, float]:
    """(started, waiting_time, total_time) from the sides' arrival times."""
    ordered = sorted(added)
    first = ordered[0] if ordered else now
    waiting = ordered[1] - first if len(ordered) > 1 else None
    return first, waiting, now - first


def nameplate_result(num_sides: int, pruned: bool) -> str:
    result = "happy" if num_sides == 2 else "lonely"
    if pruned:
        result = "pruney"
    if num_sides > 2:
        result = "crowded"
    return result


def mailbox_result(num_sides: int, moods: Iterable[str | None], pruned: bool) -> str:
    if num_sides == 0:
        result = "quiet"
    elif num_sides == 1:
        result = "lonely"
    else:
        result = "happy"
    seen = set(moods)
    # later moods win: lonely < errory < scary (reference server.py `_summarize_mailbox`)
    for mood in ("lonely", "errory", "scary"):
        if mood in seen:
            result = mood
    if pruned:
        result = "pruney"
    if num_sides > 2:
        result = "crowded"
    return result
