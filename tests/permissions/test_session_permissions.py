"""A session asking the real permission policy (through the protocol's PermissionCheck):
no bind before an accepted submit-permissions, and a stamp is good only once."""

from __future__ import annotations

import time

from pigeonhole.permissions.hashcash import mint_stamp
from pigeonhole.permissions.policy import PermissionPolicy
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.protocol.commands import PERMISSION_REQUIRED
from pigeonhole.protocol.session import PermissionCheck, Session

BIND = {"type": "bind", "appid": "app", "side": "a"}


def _session(policy: PermissionCheck, now: float) -> Session:
    rz = Rendezvous(Randomness(lambda seq: seq[0], lambda n: 0, lambda: "mb"))
    return Session(rz, object(), permissions=policy, resource="res", bits=4, now=now)


def test_bind_waits_for_an_accepted_stamp_and_a_stamp_is_spent_once() -> None:
    now = time.time()
    policy = PermissionPolicy(methods=("hashcash",), bits=4)
    first = _session(policy, now)
    refused = first.receive(BIND, now)
    assert refused.immediate[1]["error"] == PERMISSION_REQUIRED
    assert refused.close == (1008, "permission required") and not first.bound

    stamp = mint_stamp("res", 4, now)
    submit = {"type": "submit-permission", "method": "hashcash", "stamp": stamp}
    assert len(first.receive(submit, now).immediate) == 1  # the ack alone
    assert first.receive(BIND, now).close is None and first.bound

    second = _session(policy, now)
    replayed = second.receive(submit, now).immediate[1]["error"]
    assert replayed == "submit-permissions failed: hashcash stamp was already used"
    assert second.receive(BIND, now).immediate[1]["error"] == PERMISSION_REQUIRED


def test_a_policy_open_to_all_lets_bind_through() -> None:
    now = time.time()
    session = _session(PermissionPolicy(methods=("none", "hashcash")), now)
    assert session.receive(BIND, now).close is None and session.bound
