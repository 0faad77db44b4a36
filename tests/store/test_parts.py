"""A batch's writes grouped into set-based parts (store/postgres/parts.py) leave what applying every
write in turn leaves: checked on hand-made batches and on random ones. Pure."""

from __future__ import annotations

import random
from typing import Any

from pigeonhole.store.postgres.parts import ORDER, group
from tests.store.batch_model import APP, State, apply_row, empty, random_batch

#: what names a row, per kind, within one set-based statement (PostgreSQL refuses an
#: upsert that writes one row twice, and an UPDATE ... FROM with two matches picks one)
_UNIQUE = {
    "insert_nameplate": 3,
    "delete_nameplate": 3,
    "put_nameplate_side": 4,
    "put_mailbox": 3,
    "delete_mailbox": 3,
    "put_mailbox_side": 4,
    "touch": 3,
    "put_message": 2,
}


def apply_parts(grouped: dict[str, Any]) -> State:
    """Each part as one statement: its rows must not name one row twice."""
    state = empty()
    for kind, rows in grouped["parts"]:
        width = _UNIQUE.get(kind)
        if width is not None:
            keys = [tuple(row[: width - 1]) for row in rows]
            assert len(keys) == len(set(keys)), f"{kind} writes a row twice: {keys}"
        for row in rows:
            apply_row(state, [kind, *row])
    return state


def apply_in_turn(rows: list[list[Any]]) -> State:
    state = empty()
    for row in rows:
        apply_row(state, row)
    return state


def test_a_typical_batch_is_one_statement_per_kind_in_order() -> None:
    rows = [
        ["usage_nameplate", APP, 1.0, 0.5, 1.0, "happy"],
        ["put_message", 7, APP, "m1", "a", "pake", "00", False, 1.0, '"x"', ""],
        ["put_mailbox_side", APP, "m1", "a", True, 1.0, None],
        ["insert_nameplate", APP, "4", "m2", ""],
        ["put_message", 8, APP, "m1", "b", "pake", "ff", False, 1.0, '"y"', ""],
        ["touch", APP, "m1", 1.0],
        ["notify", "one"],
        ["notify", "two"],
    ]
    parts = group(rows)["parts"]
    assert [kind for kind, _ in parts] == [
        "insert_nameplate",
        "put_mailbox_side",
        "put_message",
        "touch",
        "usage_nameplate",
        "notify",
    ]
    assert [kind for kind, _ in parts] == sorted((k for k, _ in parts), key=ORDER.index)
    messages = dict(parts)["put_message"]
    assert [row[0] for row in messages] == [7, 8]  # rows lose their kind, keep order
    assert dict(parts)["notify"] == [["one"], ["two"]]
    assert apply_parts(group(rows)) == apply_in_turn(rows)


def test_a_side_written_twice_keeps_its_last_row() -> None:
    rows = [
        ["put_mailbox_side", APP, "m1", "a", True, 1.0, None],
        ["put_mailbox_side", APP, "m1", "a", True, 1.0, "happy"],
    ]
    parts = group(rows)["parts"]
    assert parts == [["put_mailbox_side", [[APP, "m1", "a", True, 1.0, "happy"]]]]


def test_a_delete_drops_the_segments_earlier_writes_to_it_only() -> None:
    rows = [
        ["put_mailbox", APP, "m1", True, 1.0, ""],
        ["put_mailbox_side", APP, "m1", "a", True, 1.0, None],
        ["put_message", 9, APP, "m1", "a", "p", "00", False, 1.0, '"x"', ""],
        ["put_mailbox_side", APP, "m2", "a", True, 1.0, None],
        ["delete_mailbox", APP, "m1"],
    ]
    assert group(rows)["parts"] == [
        ["put_mailbox_side", [[APP, "m2", "a", True, 1.0, None]]],
        ["delete_mailbox", [[APP, "m1"]]],
    ]


def test_a_name_made_again_after_its_delete_starts_a_new_segment() -> None:
    rows = [
        ["delete_nameplate", APP, "4"],
        ["insert_nameplate", APP, "4", "m9", ""],
        ["put_nameplate_side", APP, "4", "a", True, 2.0],
    ]
    parts = group(rows)["parts"]
    assert [kind for kind, _ in parts] == [
        "delete_nameplate",
        "insert_nameplate",
        "put_nameplate_side",
    ]
    assert apply_parts(group(rows)) == apply_in_turn(rows)


def test_a_mailbox_stored_after_a_touch_is_not_touched() -> None:
    rows = [["touch", APP, "m1", 5.0], ["put_mailbox", APP, "m1", False, 1.0, ""]]
    assert apply_parts(group(rows)) == apply_in_turn(rows)
    assert apply_in_turn(rows)["mailboxes"][(APP, "m1")][3] == 1.0


def test_random_batches_leave_what_every_write_in_turn_leaves() -> None:
    rng = random.Random(1)
    seqs = [0]
    for _ in range(2000):
        rows = random_batch(rng, rng.randint(1, 40), seqs)
        assert apply_parts(group(rows)) == apply_in_turn(rows), rows
