"""Which methods are offered, replay refusal, and difficulty that rises under load."""

from __future__ import annotations

import time

import pytest

from pigeonhole.permissions.hashcash import mint_stamp
from pigeonhole.permissions.policy import PermissionPolicy, extra_bits
from pigeonhole.protocol.errors import ProtocolError


def test_welcome_lists_enabled_methods() -> None:
    """permission-required carries exactly the enabled methods with bits and resource."""
    required, bits = PermissionPolicy(methods=("none", "hashcash"), bits=12).challenge("r1", 0.0)
    assert required == {"none": {}, "hashcash": {"bits": 12, "resource": "r1"}}
    assert bits == 12
    required, _ = PermissionPolicy().challenge("r2", 0.0)
    assert required == {"none": {}}


def test_unknown_method_and_unoffered_none_are_refused() -> None:
    """A method the operator did not enable is refused by name."""
    policy = PermissionPolicy(methods=("hashcash",), bits=4)
    with pytest.raises(ProtocolError, match="'none' is not one of: hashcash"):
        policy.check("none", None, "r", 4, time.time())
    with pytest.raises(ProtocolError, match="requires a 'stamp' string"):
        policy.check("hashcash", 5, "r", 4, time.time())


def test_a_stamp_is_accepted_only_once() -> None:
    """Replaying a good stamp is refused."""
    policy = PermissionPolicy(methods=("hashcash",), bits=6)
    now = time.time()
    stamp = mint_stamp("r", 6, now)
    policy.check("hashcash", stamp, "r", 6, now)
    with pytest.raises(ProtocolError, match="already used"):
        policy.check("hashcash", stamp, "r", 6, now + 1)


@pytest.mark.parametrize(
    ("rate", "expected"), [(0, 0), (20, 0), (21, 1), (39, 1), (40, 2), (79, 2), (80, 3), (10**6, 4)]
)
def test_extra_bits_per_doubling(rate: float, expected: int) -> None:
    """One more bit per doubling of the connection rate above the threshold, capped."""
    assert extra_bits(rate, threshold=20, headroom=4) == expected


def test_bits_rise_under_load_and_fall_back() -> None:
    """A burst of connections raises the bits new connections must pay; quiet lowers them."""
    policy = PermissionPolicy(
        methods=("hashcash",), bits=10, max_bits=14, load_threshold=5, load_window=10
    )
    seen = [policy.challenge(f"r{i}", 100.0 + i * 0.01)[1] for i in range(400)]
    assert seen[0] == 10
    assert seen[-1] == 14  # 400 connections in 4 s: 40/s, capped at max_bits
    assert policy.challenge("later", 200.0)[1] == 10
