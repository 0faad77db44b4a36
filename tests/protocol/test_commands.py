"""The command table: each row's handler, what it reads, what it leaves for a run's guess,
and its flags, checked against each other through `Session`."""

from __future__ import annotations

from typing import Any

import pytest

from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.commands import COMMANDS
from pigeonhole.protocol.limits import STORAGE_DOWN
from pigeonhole.protocol.session import Session
from tests.protocol.protocol_support import bound

#: every command succeeds in this order, from a fresh connection
RUN: list[dict[str, Any]] = [
    {"type": "ping", "ping": 1},
    {"type": "bind", "appid": "app1", "side": "a"},
    {"type": "list"},
    {"type": "claim", "nameplate": "4"},
    {"type": "open", "mailbox": "m"},
    {"type": "add", "phase": "pake", "body": "00"},
    {"type": "release"},
    {"type": "close"},
    {"type": "add", "phase": "version", "body": "01"},
]


def test_the_guess_of_a_run_matches_what_each_command_reads_when_decided(
    rz: Rendezvous,
) -> None:
    """`wants_run` (the rows' `leaves`) says, before anything is decided, what
    `wants` (the rows' `reads`) says just before each command is really decided."""
    guessed = Session(rz, object()).wants_run(RUN)
    live = Session(rz, object())
    decided = []
    for msg in RUN:
        decided.append(live.wants(msg))
        step = live.receive(msg, 1.0)
        if msg is not RUN[-1]:  # the last `add` follows the close: refused, reads nothing
            assert [f["type"] for f in step.immediate if f["type"] == "error"] == [], msg
    assert guessed == decided
    assert [w.names for w in decided][3:7] == [[("app1", "4")], [], [], [("app1", "4")]]
    assert decided[7].mailboxes == [("app1", "m")]  # `close` with no mailbox: the opened one
    assert decided[8].mailboxes == []


def test_a_type_without_a_row_reads_nothing_and_is_unknown(rz: Rendezvous) -> None:
    s = bound(rz, "a")
    assert "pong" not in COMMANDS
    assert s.wants({"type": "pong"}).apps == [] and s.wants({"type": 5}).apps == []
    assert s.receive({"type": "pong"}, 1.0).immediate[1]["error"] == "unknown type"


def test_only_storing_commands_are_refused_while_commits_fail(rz: Rendezvous) -> None:
    """A row marked `stores` is refused during a storage outage; the rest still work."""
    s = bound(rz, "a")
    s.receive({"type": "open", "mailbox": "m"}, 1.0)
    rz.ledger.storage_down = True
    storing = ["allocate", "claim", "release", "open", "add", "close"]
    for mtype in storing:
        step = s.receive({"type": mtype, "nameplate": "4", "mailbox": "m"}, 1.0)
        assert step.immediate[1]["error"] == STORAGE_DOWN, mtype
        assert step.effects == []
    assert sorted(t for t, row in COMMANDS.items() if row.stores) == sorted(storing)
    step = s.receive({"type": "list"}, 1.0)
    assert step.after_commit == [{"type": "nameplates", "nameplates": []}]


@pytest.mark.parametrize("mtype", ["submit-permissions", "submit-permission"])
def test_both_spellings_of_submit_permissions_share_a_row(rz: Rendezvous, mtype: str) -> None:
    """The Rust client says "submit-permission": accepted before bind, once."""
    s = Session(rz, object())
    assert len(s.receive({"type": mtype, "method": "none"}, 1.0).immediate) == 1
    assert s.receive({"type": mtype}, 1.0).immediate[1]["error"] == "permission already granted"
    assert COMMANDS["submit-permission"] is COMMANDS["submit-permissions"]
