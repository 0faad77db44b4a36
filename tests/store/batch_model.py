"""Random batches of writes as a node encodes them, and what applying them leaves.

Shared by the pure tests of store/postgres/parts.py and the PostgreSQL test of
`channel.apply_batch`: writes come from a small key space (so rows are written again,
deleted and made again within one batch), and are always valid in sequence (a nameplate
is inserted only while it does not exist).
"""

from __future__ import annotations

import random
from typing import Any

APP = "app"
NAMES = ("1", "2", "3")
MAILBOXES = ("m1", "m2", "m3")
SIDES = ("a", "b")

#: the kinds of write a batch holds (messages twice as often)
KINDS = (
    *("insert_nameplate", "delete_nameplate", "put_nameplate_side", "put_mailbox"),
    *("delete_mailbox", "put_mailbox_side", "put_message", "put_message", "touch"),
    *("usage_nameplate", "usage_transit", "notify"),
)

#: what applying leaves: table -> key -> row (usage and notifications: lists, in order)
State = dict[str, Any]


def random_batch(rng: random.Random, length: int, seqs: list[int]) -> list[list[Any]]:
    """`length` writes, each `[kind, field, ...]`; `seqs` hands out message numbers."""
    nameplates: set[str] = set()
    rows: list[list[Any]] = []
    for _ in range(length):
        t = round(rng.uniform(1, 1000), 3)
        name, mailbox, side = rng.choice(NAMES), rng.choice(MAILBOXES), rng.choice(SIDES)
        kind = rng.choice(KINDS)
        if kind == "insert_nameplate":
            if name in nameplates:
                continue
            nameplates.add(name)
            rows.append([kind, APP, name, mailbox, "192.0.2.1"])
        elif kind == "delete_nameplate":
            nameplates.discard(name)
            rows.append([kind, APP, name])
        elif kind == "put_nameplate_side":
            rows.append([kind, APP, name, side, rng.random() < 0.5, t])
        elif kind == "put_mailbox":
            rows.append([kind, APP, mailbox, rng.random() < 0.5, t, "192.0.2.1"])
        elif kind == "delete_mailbox":
            rows.append([kind, APP, mailbox])
        elif kind == "put_mailbox_side":
            mood = rng.choice((None, "happy", "lonely"))
            rows.append([kind, APP, mailbox, side, rng.random() < 0.5, t, mood])
        elif kind == "put_message":
            seqs[0] += 1
            body = rng.choice(("00ff", "abcdef", "hello"))
            is_text = body == "hello"
            rows.append([kind, seqs[0], APP, mailbox, side, "p", body, is_text, t, '"id"', ""])
        elif kind == "touch":
            rows.append([kind, APP, mailbox, t])
        elif kind == "usage_nameplate":
            rows.append([kind, APP, t, 1.5, 2.5, "happy"])
        elif kind == "usage_transit":
            paired = rng.random() < 0.5
            rows.append([kind, t, 4.5, 0.5 if paired else None, 10_000 if paired else 0, "happy"])
        else:
            rows.append([kind, f"payload {len(rows)}"])
    return rows


def empty() -> State:
    return {
        "nameplates": {},
        "nameplate_sides": {},
        "mailboxes": {},
        "mailbox_sides": {},
        "messages": {},
        "usage_nameplates": [],
        "usage_transit": [],
        "notify": [],
    }


def apply_row(state: State, row: list[Any]) -> None:
    """One write, as version 2's `channel.apply_batch` applied each in turn."""
    kind, f = row[0], row[1:]
    if kind == "insert_nameplate":
        assert (f[0], f[1]) not in state["nameplates"], "duplicate nameplate"
        state["nameplates"][(f[0], f[1])] = (f[2], f[3])
    elif kind == "delete_nameplate":
        state["nameplates"].pop((f[0], f[1]), None)
        for key in [k for k in state["nameplate_sides"] if k[:2] == (f[0], f[1])]:
            del state["nameplate_sides"][key]
    elif kind == "put_nameplate_side":
        state["nameplate_sides"][(f[0], f[1], f[2])] = (f[3], f[4])
    elif kind == "put_mailbox":
        before = state["mailboxes"].get((f[0], f[1]))
        updated = before[3] if before else f[3]
        state["mailboxes"][(f[0], f[1])] = (f[2], f[3], f[4], updated)
    elif kind == "delete_mailbox":
        state["mailboxes"].pop((f[0], f[1]), None)
        for key in [k for k in state["mailbox_sides"] if k[:2] == (f[0], f[1])]:
            del state["mailbox_sides"][key]
        for seq in [s for s, m in state["messages"].items() if m[:2] == (f[0], f[1])]:
            del state["messages"][seq]
    elif kind == "put_mailbox_side":
        state["mailbox_sides"][(f[0], f[1], f[2])] = (f[3], f[4], f[5])
    elif kind == "put_message":
        state["messages"][f[0]] = tuple(f[1:])
    elif kind == "touch":
        found = state["mailboxes"].get((f[0], f[1]))
        if found is not None:
            state["mailboxes"][(f[0], f[1])] = (*found[:3], max(found[3], f[2]))
    elif kind == "usage_nameplate":
        state["usage_nameplates"].append(tuple(f))
    elif kind == "usage_transit":
        state["usage_transit"].append(tuple(f))
    elif kind == "notify":
        state["notify"].append(f[0])
    else:
        raise AssertionError(f"unknown write {kind}")
