"""The protocol core deciding on loaded rows, as a node of a shared store does.

`Session.wants` says what a command reads; `Session.fork` decides on another rendezvous
and `adopt` keeps the result only once it committed; store/postgres/shared.py builds the
rendezvous from the rows `channel.lock_and_load` returns. Pure: no database here.
"""

from __future__ import annotations

import itertools
from typing import Any

from pigeonhole.protocol.channels import Randomness
from pigeonhole.protocol.errors import CROWDED, GREEDY
from pigeonhole.protocol.limits import ADDRESS_NAMEPLATES, Limits
from pigeonhole.protocol.session import Session
from pigeonhole.store.postgres.shared import Cover, batch_spec, loaded_rendezvous, touches

NOW = 1_000.0
_ids = itertools.count(1)
RANDOM = Randomness(lambda seq: seq[0], lambda n: 0, lambda: f"mb{next(_ids)}")


def _empty(**overrides: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = {
        "seq": None,
        "nameplates": [],
        "nameplate_sides": [],
        "mailboxes": [],
        "mailbox_sides": [],
        "messages": [],
        "bodies": [],
        "app_names": [],
        "owners": [],
    }
    loaded.update(overrides)
    return loaded


def _rz(loaded: dict[str, Any], limits: Limits | None = None, stored: int = 0):  # type: ignore[no-untyped-def]
    return loaded_rendezvous(
        loaded, NOW, RANDOM, blur_time=None, limits=limits or Limits(), stored_bytes=stored
    )


def _bound(side: str, owner: str = "192.0.2.1") -> Session:
    session = Session(_rz(_empty()), object(), owner=owner)
    session.receive({"type": "bind", "appid": "app", "side": side}, NOW)
    return session


def test_wants_name_what_each_command_reads() -> None:
    s = _bound("a")
    assert s.wants({"type": "ping", "ping": 1}).names == []
    claim = s.wants({"type": "claim", "nameplate": "4"})
    assert claim.names == [("app", "4")] and claim.owner
    allocate = s.wants({"type": "allocate"})
    assert allocate.allocates == ["app"] and allocate.apps == []  # not every name
    assert s.wants({"type": "list"}).apps == ["app"]
    opened = s.wants({"type": "open", "mailbox": "m"})
    assert opened.mailboxes == [("app", "m")] and opened.bodies == [("app", "m")]
    assert s.wants({"type": "add", "phase": "p", "body": ""}).mailboxes == []  # not open
    spec = batch_spec([claim, opened], ["192.0.2.1", "", "192.0.2.1"])
    assert spec["names"] == [("app", "4")] and spec["owners"] == ["192.0.2.1"]
    assert not spec["seq"]


def test_a_fork_is_kept_only_when_adopted() -> None:
    s = _bound("a")
    trial = s.fork(_rz(_empty()))
    step = trial.receive({"type": "allocate"}, NOW)
    assert step.after_commit[0]["type"] == "allocated"
    # rolled back: the session never allocated, and can again
    again = s.fork(_rz(_empty()))
    assert again.receive({"type": "allocate"}, NOW).after_commit[0]["type"] == "allocated"
    s.adopt(again)
    third = s.fork(_rz(_empty()))
    assert third.receive({"type": "allocate"}, NOW).immediate[-1]["error"] == GREEDY


def test_loaded_rows_decide_crowded_and_quotas_like_memory_does() -> None:
    loaded = _empty(
        nameplates=[["app", "4", "mb", "192.0.2.9"]],
        nameplate_sides=[["app", "4", "x", True, 1.0], ["app", "4", "y", True, 2.0]],
        mailboxes=[["app", "mb", True, "192.0.2.9", 5.0]],
        mailbox_sides=[["app", "mb", "x", True, 1.0, None], ["app", "mb", "y", True, 2.0, None]],
    )
    third = _bound("z").fork(_rz(loaded))
    step = third.receive({"type": "claim", "nameplate": "4"}, NOW)
    assert step.immediate[-1]["error"] == CROWDED
    # the quota counts what the database says the address holds
    full = _empty(owners=[["192.0.2.1", 32, 0, 0]])
    step = _bound("a").fork(_rz(full)).receive({"type": "claim", "nameplate": "5"}, NOW)
    assert step.immediate[-1]["error"].startswith(ADDRESS_NAMEPLATES)


def test_a_used_mailbox_is_touched_and_messages_are_numbered_from_the_block() -> None:
    loaded = _empty(
        seq=4096,
        mailboxes=[["app", "mb", False, None, 5.0], ["app", "idle", False, None, 5.0]],
        mailbox_sides=[["app", "mb", "a", True, 1.0, None]],
    )
    rz = _rz(loaded)
    s = _bound("a").fork(rz)
    s.receive({"type": "open", "mailbox": "mb"}, NOW)
    step = s.receive({"type": "add", "phase": "p", "body": "aa"}, NOW)
    assert [e.seq for e in step.effects if hasattr(e, "seq")] == [4096]
    assert touches(rz, loaded, NOW) == [["touch", "app", "mb", NOW]]
    assert rz.mailbox("app", "idle").updated == 5.0  # pruning reads the stored time


def test_a_run_of_commands_is_guessed_as_if_each_earlier_one_succeeded() -> None:
    """`wants_run`: a `bind` names the app an `allocate` reads, an `open` the mailbox an
    `add` writes; a lone `add` before any `open` reads nothing."""
    fresh = Session(_rz(_empty()), object(), owner="192.0.2.1")
    bind = {"type": "bind", "appid": "app", "side": "a"}
    bound_then_allocate = fresh.wants_run([bind, {"type": "allocate"}])
    assert bound_then_allocate[0].allocates == [] and bound_then_allocate[1].allocates == ["app"]
    s = _bound("a")
    add = {"type": "add", "phase": "pake", "body": "00"}
    opened, added = s.wants_run([{"type": "open", "mailbox": "m"}, add])
    assert opened.mailboxes == [("app", "m")]
    assert added.mailboxes == [("app", "m")] and added.seq and added.owner
    assert s.wants_run([add])[0].mailboxes == []
    # the guess changes nothing: the session itself has opened nothing
    assert s.mailbox is None and s.wants(add).mailboxes == []


def test_a_cover_holds_only_what_the_batch_locked_and_loaded() -> None:
    s = _bound("a")
    spec = batch_spec(s.wants_run([{"type": "open", "mailbox": "m"}]), ["192.0.2.1"])
    cover = Cover(spec)
    assert cover.covers(s.wants({"type": "open", "mailbox": "m"}), "192.0.2.1")
    assert not cover.covers(s.wants({"type": "open", "mailbox": "other"}), "192.0.2.1")
    assert not cover.covers(s.wants({"type": "claim", "nameplate": "4"}), "192.0.2.1")
    assert not cover.covers(s.wants({"type": "allocate"}), "192.0.2.1")  # app not listed
    # an `add` needs a message number: this batch took none
    s.receive({"type": "open", "mailbox": "m"}, NOW)
    assert not cover.covers(s.wants({"type": "add", "phase": "p", "body": "00"}), "192.0.2.1")
    assert cover.covers(s.wants({"type": "ping", "ping": 1}), "192.0.2.9")


def _allocating(row: list[Any], **overrides: Any) -> Any:
    return _rz(_empty(allocates=[row], **overrides))


def test_allocation_decides_on_what_short_names_read() -> None:
    """`channel.short_names`' answer stands for the app's names: full lengths are skipped,
    a mostly taken length's free numbers are chosen from, a mostly free one's taken names
    are avoided, and beside a crowd holding 1-999 the drawn long numbers found free come
    first."""
    crowd = _allocating(["app", [9, 90, 900], 0, "", [], ["4242", "77777"]])
    s = Session(crowd, object(), owner="192.0.2.1")
    s.receive({"type": "bind", "appid": "app", "side": "a"}, NOW)
    assert s.receive({"type": "allocate"}, NOW).after_commit[0]["nameplate"] == "4242"
    # three digits mostly taken: its free numbers, then none left there: a long number
    rz = _allocating(["app", [9, 90, 898], 3, "free", [512, 777], []])
    names = [rz.allocate("app", f"s{i}", NOW, []) for i in range(3)]
    assert names[:2] == ["512", "777"] and len(names[2]) >= 4
    # two digits mostly free: never one of its taken names (drawn: RANDOM draws 10 first)
    taken = [str(n) for n in range(10, 55)]
    rz = _allocating(["app", [9, 45, 0], 2, "taken", taken, []])
    assert rz.allocate("app", "a", NOW, []) == "55"
    # a one-digit nameplate released in the batch is the next allocation's
    out: list[Any] = []
    rz = _allocating(
        ["app", [9, 90, 900], 0, "", [], ["5000"]],
        nameplates=[["app", "4", "mb", None]],
        nameplate_sides=[["app", "4", "x", True, 1.0]],
        mailboxes=[["app", "mb", True, None, 5.0]],
        mailbox_sides=[["app", "mb", "x", True, 1.0, None]],
    )
    rz.release("app", "4", "x", NOW, out)
    assert rz.allocate("app", "b", NOW, out) == "4"
    assert rz.allocate("app", "c", NOW, out) == "5000"


def test_an_app_emptied_in_the_batch_still_allocates_from_what_was_read() -> None:
    """A `close` that deletes the app's last loaded mailbox does not make a later
    `allocate` of the batch forget what `channel.short_names` read (it would take 1-9,
    all taken, and collide with the database again at every retry)."""
    rz = _allocating(
        ["app", [9, 90, 900], 0, "", [], ["5000"]],
        mailboxes=[["app", "mb", False, None, 5.0]],
        mailbox_sides=[["app", "mb", "x", True, 1.0, None]],
    )
    rz.close("app", "mb", "x", "happy", NOW, [])
    assert rz.mailbox("app", "mb") is None
    assert rz.allocate("app", "b", NOW, []) == "5000"
