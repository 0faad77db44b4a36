"""The per-connection state machine, message by message, without any I/O."""

from __future__ import annotations

from typing import Any

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.session import Session
from tests.protocol.protocol_support import bound


def send(s: Session, now: float = 1.0, **msg: Any) -> tuple[list[dict[str, Any]], Any]:
    step = s.receive(msg, now)
    assert step.immediate[0]["type"] == "ack"
    return step.immediate[1:] + step.after_commit + step.replayed, step


def error_of(s: Session, **msg: Any) -> str:
    frames, _ = send(s, **msg)
    assert len(frames) == 1 and frames[0]["type"] == "error", frames
    assert frames[0]["orig"] == msg
    return str(frames[0]["error"])


def test_ack_copies_id_and_comes_first(rz: Rendezvous) -> None:
    """Every typed message is acked first with the client's id (null when absent)."""
    s = Session(rz, object())
    step = s.receive({"type": "ping", "ping": 5, "id": "p1"}, 0.0)
    assert step.immediate == [{"type": "ack", "id": "p1"}, {"type": "pong", "pong": 5}]
    step = s.receive({"type": "ping", "ping": {"a": 1}}, 0.0)
    assert step.immediate[0] == {"type": "ack", "id": None}
    assert step.immediate[1] == {"type": "pong", "pong": {"a": 1}}


@pytest.mark.parametrize(
    "mtype", ["list", "allocate", "claim", "release", "open", "add", "close", "nonsense"]
)
def test_must_bind_first(rz: Rendezvous, mtype: str) -> None:
    """Anything but ping and bind before bind is refused with the reference's string."""
    assert error_of(Session(rz, object()), type=mtype) == "must bind first"


def test_bind_errors(rz: Rendezvous) -> None:
    """bind checks appid, then side, then refuses a second bind."""
    s = Session(rz, object())
    assert error_of(s, type="bind", side="a") == "bind requires 'appid'"
    assert error_of(s, type="bind", appid="x") == "bind requires 'side'"
    assert error_of(s, type="bind", appid=1, side="a") == "'appid' must be a string"
    assert error_of(s, type="bind", appid="x", side=["a"]) == "'side' must be a string"
    assert not s.bound
    frames, step = send(s, type="bind", appid="x", side="a", client_version=["python", "0.24"])
    assert frames == []
    assert step.effects == [fx.UsageClientVersion("x", "a", 1.0, "python", "0.24")]
    assert error_of(s, type="bind", appid="x", side="a") == "already bound"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(["rust", 3, "extra"], ("rust", "3")), (["only"], (None, None)), ("abc", (None, None))],
)
def test_client_version_forms(rz: Rendezvous, value: object, expected: tuple[Any, Any]) -> None:
    """client_version is [impl, version] stringified; anything else is recorded as NULL."""
    s = Session(rz, object())
    _, step = send(s, type="bind", appid="x", side="a", client_version=value)
    (usage,) = step.effects
    assert (usage.implementation, usage.version) == expected


def test_unknown_type_after_bind(rz: Rendezvous) -> None:
    """An unknown type after bind is `unknown type`."""
    assert error_of(bound(rz, "a"), type="frobnicate") == "unknown type"


def test_allocate_claims_and_is_not_greedy(rz: Rendezvous) -> None:
    """allocate gives a one-digit nameplate on an empty app; a second one is greedy."""
    s = bound(rz, "a")
    frames, step = send(s, type="allocate")
    assert frames[0]["type"] == "allocated"
    name = frames[0]["nameplate"]
    assert name in {str(i) for i in range(1, 10)}
    assert any(isinstance(e, fx.PutNameplate) for e in step.effects)
    assert error_of(s, type="allocate") == "you already allocated one, don't be greedy"
    frames, _ = send(s, type="claim", nameplate=name)
    assert frames[0]["type"] == "claimed"


def test_allocation_is_shortest_free(rz: Rendezvous) -> None:
    """9 allocations give exactly 1..9, the 10th gives two digits."""
    names = set()
    for i in range(9):
        frames, _ = send(bound(rz, f"s{i}"), type="allocate")
        names.add(frames[0]["nameplate"])
    assert names == {str(i) for i in range(1, 10)}
    frames, _ = send(bound(rz, "s9"), type="allocate")
    assert len(frames[0]["nameplate"]) == 2


def test_claim_errors_and_validation(rz: Rendezvous) -> None:
    """claim validates the nameplate with clear errors instead of dropping the connection."""
    s = bound(rz, "a")
    assert error_of(s, type="claim") == "claim requires 'nameplate'"
    assert error_of(s, type="claim", nameplate="abc") == "nameplate 'abc' has non-digits"
    assert error_of(s, type="claim", nameplate=12) == "nameplate 12 is <class 'int'> not str"
    assert error_of(s, type="claim", nameplate="1" * 41) == (
        "nameplate '1111111111'.. is too long, 41>40"
    )
    frames, _ = send(s, type="claim", nameplate="0042")
    assert frames[0]["type"] == "claimed"
    assert error_of(s, type="claim", nameplate="0042") == "only one claim per connection"


def test_two_sides_share_a_mailbox_third_is_crowded(rz: Rendezvous) -> None:
    """Both sides get the same mailbox; a third side is crowded and its rows are kept."""
    a, b, c = bound(rz, "a"), bound(rz, "b"), bound(rz, "c")
    ma = send(a, type="claim", nameplate="5")[0][0]["mailbox"]
    mb = send(b, type="claim", nameplate="5")[0][0]["mailbox"]
    assert ma == mb and len(ma) == 13
    frames, step = send(c, type="claim", nameplate="5")
    orig = {"type": "claim", "nameplate": "5"}
    assert frames == [{"type": "error", "error": "crowded", "orig": orig}]
    assert step.effects, "the crowding side's rows are still written"
    assert error_of(c, type="open", mailbox=ma) == "crowded"


def test_reclaim_after_release_while_alive(rz: Rendezvous) -> None:
    """A side that released a nameplate still held by the other side gets `reclaimed`."""
    a, b = bound(rz, "a"), bound(rz, "b")
    send(a, type="claim", nameplate="2")
    send(b, type="claim", nameplate="2")
    assert send(a, type="release")[0] == [{"type": "released"}]
    a2 = bound(rz, "a")
    assert error_of(a2, type="claim", nameplate="2") == "reclaimed"


def test_claim_is_idempotent_per_side(rz: Rendezvous) -> None:
    """The same side claiming again from a new connection gets the same mailbox."""
    first = send(bound(rz, "a"), type="claim", nameplate="1")[0][0]["mailbox"]
    again = send(bound(rz, "a"), type="claim", nameplate="1")[0][0]["mailbox"]
    assert first == again


def test_release_rules(rz: Rendezvous) -> None:
    """release: one per connection, same nameplate, must follow claim unless named."""
    s = bound(rz, "a")
    assert error_of(s, type="release") == "release without nameplate must follow claim"
    assert send(s, type="release", nameplate="999")[0] == [{"type": "released"}]
    assert error_of(s, type="release") == "only one release per connection"
    t = bound(rz, "b")
    send(t, type="claim", nameplate="1")
    assert error_of(t, type="release", nameplate="2") == (
        "release and claim must use same nameplate"
    )


def test_full_release_deletes_nameplate_with_usage(rz: Rendezvous) -> None:
    """When both sides release, the nameplate goes and a happy usage row is written."""
    a, b = bound(rz, "a"), bound(rz, "b")
    send(a, 10.0, type="claim", nameplate="3")
    send(b, 14.0, type="claim", nameplate="3")
    send(a, 15.0, type="release")
    _, step = send(b, 20.0, type="release")
    usage = [e for e in step.effects if isinstance(e, fx.UsageNameplate)]
    assert usage == [fx.UsageNameplate("app1", 10.0, 4.0, 10.0, "happy")]
    assert rz.list_nameplates("app1") == []


def test_open_delivers_history_then_live_with_echo(rz: Rendezvous) -> None:
    """open returns stored messages in order; add goes to every subscriber, sender too."""
    a, b = bound(rz, "a"), bound(rz, "b")
    send(a, type="open", mailbox="m1")
    _, step = send(a, 2.0, type="add", phase="pake", body="aa", id="i1")
    assert step.deliveries == [
        (
            a.handle,
            {
                "type": "message",
                "side": "a",
                "phase": "pake",
                "body": "aa",
                "server_rx": 2.0,
                "id": "i1",
            },
        )
    ]
    send(a, 3.0, type="add", phase="pake", body="aa")
    frames, _ = send(b, type="open", mailbox="m1")
    assert [(f["phase"], f["server_rx"]) for f in frames] == [("pake", 2.0), ("pake", 3.0)]
    _, step = send(b, 4.0, type="add", phase="version", body="bb")
    assert [h for h, _ in step.deliveries] == [a.handle, b.handle]


def test_open_and_add_errors(rz: Rendezvous) -> None:
    """open/add preconditions and field checks, with the reference's strings."""
    s = bound(rz, "a")
    assert error_of(s, type="add", phase="p", body="aa") == "must open mailbox before adding"
    assert error_of(s, type="open") == "open requires 'mailbox'"
    assert error_of(s, type="open", mailbox=7) == "'mailbox' must be a string"
    send(s, type="open", mailbox="m")
    assert error_of(s, type="open", mailbox="m") == "only one open per connection"
    assert error_of(s, type="add", body="aa") == "missing 'phase'"
    assert error_of(s, type="add", phase="p") == "missing 'body'"
    assert error_of(s, type="add", phase="p", body="xyz") == "'body' must be a hex string"
    assert error_of(s, type="add", phase={"x": 1}, body="aa") == "'phase' must be a string"


def test_close_rules_and_deletion(rz: Rendezvous) -> None:
    """close: one per connection, same mailbox; the last close deletes and writes usage."""
    a, b = bound(rz, "a"), bound(rz, "b")
    assert error_of(a, type="close") == "close without mailbox must follow open"
    ma = send(a, 1.0, type="claim", nameplate="8")[0][0]["mailbox"]
    send(b, 3.0, type="claim", nameplate="8")
    send(a, type="open", mailbox=ma)
    assert error_of(a, type="close", mailbox="other") == "open and close must use same mailbox"
    assert error_of(a, type="close", mood=5) == "'mood' must be a string"
    assert send(a, 5.0, type="close", mood="happy")[0] == [{"type": "closed"}]
    assert error_of(a, type="close") == "only one close per connection"
    # b never released its claim: the last close still succeeds and removes the nameplate
    frames, step = send(b, 9.0, type="close", mailbox=ma, mood="scary")
    assert frames == [{"type": "closed"}]
    kinds = [type(e) for e in step.effects]
    assert fx.DeleteMailbox in kinds and fx.DeleteNameplate in kinds
    (mbox_usage,) = [e for e in step.effects if isinstance(e, fx.UsageMailbox)]
    assert (mbox_usage.result, mbox_usage.waiting_time, mbox_usage.total_time) == (
        "scary",
        2.0,
        8.0,
    )
    assert rz.apps == {}


def test_close_of_unknown_mailbox_is_a_quiet_closed(rz: Rendezvous) -> None:
    """Closing a mailbox that never existed answers `closed` and creates nothing."""
    frames, step = send(bound(rz, "a"), type="close", mailbox="neverexisted")
    assert frames == [{"type": "closed"}]
    assert step.effects == []


def test_list_sorted_as_strings_and_disallowed(rz: Rendezvous) -> None:
    """list returns every nameplate of the app sorted as strings, or none when disallowed."""
    for i, name in enumerate(["2", "10"]):
        send(bound(rz, f"s{i}"), type="claim", nameplate=name)
    frames, _ = send(bound(rz, "x"), type="list")
    assert frames == [{"type": "nameplates", "nameplates": [{"id": "10"}, {"id": "2"}]}]
    frames, _ = send(bound(rz, "y", allow_list=False), type="list")
    assert frames == [{"type": "nameplates", "nameplates": []}]
    frames, _ = send(bound(rz, "z", app="other"), type="list")
    assert frames == [{"type": "nameplates", "nameplates": []}]


def test_apps_are_isolated(rz: Rendezvous) -> None:
    """The same nameplate and mailbox id in two apps are two different channels."""
    a = send(bound(rz, "a", app="A"), type="claim", nameplate="1")[0][0]["mailbox"]
    b = send(bound(rz, "b", app="B"), type="claim", nameplate="1")[0][0]["mailbox"]
    assert a != b
    x = bound(rz, "x", app="A")
    send(x, type="open", mailbox="shared")
    send(x, type="add", phase="p", body="aa")
    frames, _ = send(bound(rz, "y", app="B"), type="open", mailbox="shared")
    assert frames == []


def test_disconnect_stops_live_delivery(rz: Rendezvous) -> None:
    """A dropped connection is no longer a subscriber; its side stays on the mailbox."""
    a, b = bound(rz, "a"), bound(rz, "b")
    send(a, type="open", mailbox="m")
    a.disconnect()
    _, step = send(b, type="open", mailbox="m")
    _, step = send(b, type="add", phase="p", body="aa")
    assert [h for h, _ in step.deliveries] == [b.handle]


@pytest.mark.parametrize("body", ["ab cd", " ab", "ab\n", "ａｂ", "0x12", "a"])
def test_add_body_must_be_pairs_of_hex_digits_only(rz: Rendezvous, body: str) -> None:
    """Whitespace that bytes.fromhex would skip, and non-ASCII digits, are not hex."""
    s = bound(rz, "a")
    send(s, type="open", mailbox="m")
    assert error_of(s, type="add", phase="p", body=body) == "'body' must be a hex string"
