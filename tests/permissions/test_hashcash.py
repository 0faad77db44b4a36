"""Hashcash v1 stamps checked exactly, against our minting and the `hashcash` program."""

from __future__ import annotations

import calendar
import hashlib
import shutil
import subprocess
import time

import pytest

from pigeonhole.permissions.hashcash import leading_zero_bits, mint_stamp, verify_stamp
from pigeonhole.protocol.errors import ProtocolError

NOW = float(calendar.timegm(time.strptime("2026-11-23 12:00:00", "%Y-%m-%d %H:%M:%S")))
WINDOW = 2 * 86400.0


def check(stamp: str, resource: str = "res", bits: int = 8, now: float = NOW) -> None:
    verify_stamp(stamp, resource=resource, bits=bits, now=now, window=WINDOW)


def refused(stamp: str, **kw: object) -> str:
    with pytest.raises(ProtocolError) as info:
        check(stamp, **kw)  # type: ignore[arg-type]
    return info.value.explain


def tamper_until_bad(stamp: str) -> str:
    """Change the counter until the hash no longer has the claimed zero bits."""
    head, _, _ = stamp.rpartition(":")
    bits = int(stamp.split(":")[1])
    for n in range(1000):
        candidate = f"{head}:zz{n}"
        if leading_zero_bits(hashlib.sha1(candidate.encode()).digest()) < bits:
            return candidate
    raise AssertionError("no bad counter found")


def test_leading_zero_bits() -> None:
    """Zero bits are counted from the most significant bit of the digest."""
    assert leading_zero_bits(b"\x00\x00\x80") == 16
    assert leading_zero_bits(b"\x00\x01") == 15
    assert leading_zero_bits(b"\xff") == 0


def test_our_minted_stamp_is_accepted() -> None:
    """A stamp we mint for the resource and bits verifies."""
    check(mint_stamp("res", 8, NOW))


def test_stamp_from_the_hashcash_program_is_accepted() -> None:
    """The independent Debian `hashcash -m -b N RESOURCE` program's stamps verify."""
    program = shutil.which("hashcash")
    assert program is not None, "the hashcash program is installed by scripts/setup --test"
    out = subprocess.run(
        [program, "-m", "-q", "-b", "10", "0123abcd"], capture_output=True, text=True, check=True
    )
    stamp = out.stdout.strip()
    verify_stamp(stamp, resource="0123abcd", bits=10, now=time.time(), window=WINDOW)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda s: s + ":extra", "must have 7 fields, not 8"),
        (lambda s: "0" + s[1:], "version must be 1"),
        (lambda s: s.replace(":8:", ":x:", 1), "bad bits"),
        (lambda s: s.replace(":8:", ":4:", 1), "claims 4 bits, 8 required"),
        (lambda s: s.replace(":res:", ":other:", 1), "for another resource"),
        (lambda s: s.replace(s.split(":")[2], "261399", 1), "bad date"),
        (lambda s: s.replace(s.split(":")[2], "991231", 1), "expired or from the future"),
        (lambda s: s.replace(s.split(":")[2], "200101", 1), "expired or from the future"),
        (tamper_until_bad, "zero bits, claims 8"),
    ],
)
def test_every_kind_of_bad_stamp_is_refused(make: object, expected: str) -> None:
    """Each way a stamp can be wrong is refused with a message saying which."""
    stamp = mint_stamp("res", 8, NOW)
    bad = make(stamp)  # type: ignore[operator]
    assert expected in refused(bad)


def test_date_only_stamps_cover_their_day() -> None:
    """A YYMMDD stamp from today is inside the window; one from long ago is not."""
    head = "1:0:261123:res::abc:"
    check(head + "0", bits=0)
    assert "expired" in refused("1:0:261001:res::abc:0", bits=0)
