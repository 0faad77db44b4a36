"""How many long numbers a node draws for an `allocate` (server/node/batches.py): enough
that one colliding stays below LONG_COLLISION, however many nameplates the database
holds, and no more than that asks."""

from __future__ import annotations

import pytest

from pigeonhole.server.node.batches import (
    LONG_COLLISION,
    LONG_DRAWS,
    LONG_NUMBERS,
    long_draws,
)


@pytest.mark.parametrize(
    "nameplates", [0, 1, 999, 1_000, 2_000, 8_000, 15_000, 60_000, 150_000, 400_000, 10**7]
)
def test_the_draws_are_the_fewest_that_keep_a_collision_rare(nameplates: int) -> None:
    draws = long_draws(nameplates)
    share = min(nameplates, LONG_NUMBERS) / LONG_NUMBERS
    assert 1 <= draws <= LONG_DRAWS
    if draws < LONG_DRAWS:  # every draw taken, and the core's blind one too
        assert share ** (draws + 1) <= LONG_COLLISION
    if draws > 1:  # one fewer would not do
        assert share**draws > LONG_COLLISION


def test_a_crowd_of_15000_draws_three_and_a_nearly_full_range_the_most() -> None:
    assert [long_draws(n) for n in (0, 400, 15_000, 500_000)] == [1, 1, 3, LONG_DRAWS]
