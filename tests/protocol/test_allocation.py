"""The allocation policy beside a crowd: the shortest free number, never a taken one, each
free number of that length equally likely (the reference's `random.choice`).

The crowd is 15,000 waiting senders, each holding a nameplate it allocated, as on a busy
server; what is asserted is the result, not its time.
"""

from __future__ import annotations

import random
from collections import Counter

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.store.loading import StoredRows, load_state

APP = "lothar.com/wormhole/text-or-file-xfer"
CROWD = 15_000
#: the chi-squared statistic's bound for these tests: far in the tail (p < 1e-9 for the
#: degrees of freedom used here), so only a skewed choice fails, never bad luck; the
#: seeds are fixed, so a run is reproducible anyway
CHI2_BOUND = {7: 52.0, 39: 110.0, 449: 640.0}


def seeded(seed: int) -> Randomness:
    rng = random.Random(seed)
    ids = iter(range(10**9))
    return Randomness(rng.choice, rng.randrange, lambda: f"mb{next(ids):09d}")


def crowd_of(rz: Rendezvous, size: int) -> list[tuple[str, str, str]]:
    """`size` waiting senders: (side, nameplate, mailbox) each, allocated one by one."""
    held = []
    for i in range(size):
        side = f"s{i}"
        name = rz.allocate(APP, side, float(i), [])
        held.append((side, name, rz.apps[APP].nameplates[name].mailbox_id))
    return held


def leave(rz: Rendezvous, side: str, mailbox_id: str) -> None:
    """A sender gives up: it closes its mailbox (its nameplate goes with it)."""
    out: list[fx.Effect] = []
    rz.close(APP, mailbox_id, side, "lonely", 0.0, out)
    assert any(isinstance(e, fx.DeleteNameplate) for e in out)


def chi2(counts: Counter[str], names: set[str], trials: int) -> float:
    expected = trials / len(names)
    return sum((counts[n] - expected) ** 2 / expected for n in names)


def test_a_crowd_of_15000_takes_the_shortest_numbers_first_and_never_one_taken() -> None:
    rz = Rendezvous(seeded(1))
    held = crowd_of(rz, CROWD)
    names = [name for _, name, _ in held]
    assert len(set(names)) == CROWD  # never a taken one
    assert set(names[:9]) == {str(n) for n in range(1, 10)}
    assert set(names[9:99]) == {str(n) for n in range(10, 100)}
    assert set(names[99:999]) == {str(n) for n in range(100, 1000)}
    assert all(1000 <= int(n) < 1_000_000 for n in names[999:])
    # an allocation beside the crowd is still a free long number
    for i in range(200):
        name = rz.allocate(APP, f"more{i}", 0.0, [])
        assert 1000 <= int(name) < 1_000_000 and name not in names
        names.append(name)
    assert len(rz.apps[APP].nameplates) == CROWD + 200


def test_beside_the_crowd_each_free_short_number_is_equally_likely() -> None:
    """Senders of the crowd leave: the next allocation is among the shortest free numbers,
    each as often as the others, whether that length is mostly taken or mostly free."""
    rz = Rendezvous(seeded(2))
    held = crowd_of(rz, CROWD)
    pick = random.Random(3)
    by_name = {name: (side, mailbox) for side, name, mailbox in held}

    def free_up(names: list[str]) -> None:
        for name in names:
            side, mailbox = by_name.pop(name)
            leave(rz, side, mailbox)

    def trials(free: set[str], count: int) -> Counter[str]:
        """Allocate and leave again `count` times: the free numbers stay the same."""
        seen: Counter[str] = Counter()
        for t in range(count):
            side = f"t{t}"
            name = rz.allocate(APP, side, 0.0, [])
            assert name in free, name  # the shortest free, never a taken one
            seen[name] += 1
            leave(rz, side, rz.apps[APP].nameplates[name].mailbox_id)
        return seen

    # three-digit numbers, mostly taken: 450 free of 900 (the length's free list)
    three = pick.sample([str(n) for n in range(100, 1000)], 450)
    free_up(three)
    seen = trials(set(three), 45_000)
    assert set(seen) == set(three)
    assert chi2(seen, set(three), 45_000) < CHI2_BOUND[449]
    # two-digit numbers free too: those are shorter, so only they come now
    two = pick.sample([str(n) for n in range(10, 100)], 40)
    free_up(two)
    seen = trials(set(two), 8_000)
    assert chi2(seen, set(two), 8_000) < CHI2_BOUND[39]
    # one digit, mostly free (drawn directly): 8 of 9 free
    one = pick.sample([str(n) for n in range(1, 10)], 8)
    free_up(one)
    seen = trials(set(one), 8_000)
    assert chi2(seen, set(one), 8_000) < CHI2_BOUND[7]
    # taken again one by one: each allocation takes the shortest free number left
    order = [rz.allocate(APP, f"back{i}", 0.0, []) for i in range(len(one) + len(two) + 4)]
    assert set(order[:8]) == set(one)
    assert set(order[8:48]) == set(two)
    assert all(len(n) == 3 and n in three for n in order[48:])


def test_a_name_of_another_shape_leaves_its_number_free() -> None:
    """Names "07" and "0" are nameplates of their own (a claim accepts them): 7 stays free."""
    rz = Rendezvous(seeded(4))
    out: list[fx.Effect] = []
    for n in range(1, 10):
        if n != 7:
            rz.claim(APP, str(n), f"s{n}", 0.0, out)
    rz.claim(APP, "07", "x", 0.0, out)
    rz.claim(APP, "0", "y", 0.0, out)
    assert rz.allocate(APP, "z", 0.0, out) == "7"
    assert len(rz.allocate(APP, "w", 0.0, out)) == 2


def test_a_crowd_loaded_after_a_restart_allocates_like_the_one_that_was_saved() -> None:
    """The state rebuilt from stored rows keeps the same counts: with 1-999 held, a long
    number; with one short number left, that one."""
    rows = [(APP, str(n), f"mb{n}", None) for n in range(1, 1000) if n != 512]
    rows.append((APP, "4096", "mb4096", None))
    mailboxes = [(APP, r[2], 1, None) for r in rows]
    sides = [(APP, r[2], "s", 1, 0.0, None) for r in rows]
    rz = Rendezvous(seeded(5))
    load_state(rz, 0.0, StoredRows(mailboxes, sides, [], rows, []))
    assert rz.allocate(APP, "a", 0.0, []) == "512"
    name = rz.allocate(APP, "b", 0.0, [])
    assert 1000 <= int(name) < 1_000_000 and name != "4096"
    # closing a loaded mailbox deletes the nameplate pointing at it, freeing its number
    out: list[fx.Effect] = []
    rz.close(APP, "mb7", "s", "lonely", 0.0, out)
    assert fx.DeleteNameplate(APP, "7") in out
    assert rz.allocate(APP, "c", 0.0, []) == "7"
