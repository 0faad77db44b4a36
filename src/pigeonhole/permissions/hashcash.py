"""Hashcash v1 stamps: `1:bits:date:resource:ext:rand:counter`, checked exactly.

A stamp is valid for a resource when it has seven fields, version 1, claimed bits at
least the required bits, the expected resource, a date inside the accepted window, and
its SHA-1 (of the whole stamp text) starts with at least the claimed number of zero
bits. Replay is the policy's business (see policy.py).
"""

from __future__ import annotations

import calendar
import hashlib
import itertools
import secrets
import time

from pigeonhole.protocol.errors import ProtocolError

_DATE_FORMATS = {6: "%y%m%d", 10: "%y%m%d%H%M", 12: "%y%m%d%H%M%S"}


def leading_zero_bits(digest: bytes) -> int:
    bits = 0
    for byte in digest:
        if byte == 0:
            bits += 8
            continue
        return bits + 8 - byte.bit_length()
    return bits


def stamp_date(text: str) -> float:
    """UNIX time of a hashcash date field (YYMMDD[hhmm[ss]], UTC)."""
    fmt = _DATE_FORMATS.get(len(text))
    if fmt is None or not text.isdigit():
        raise ProtocolError(f"hashcash stamp has a bad date {text!r}")
    try:
        parsed = time.strptime(text, fmt)
    except ValueError:
        raise ProtocolError(f"hashcash stamp has a bad date {text!r}") from None
    return float(calendar.timegm(parsed))


def verify_stamp(stamp: str, *, resource: str, bits: int, now: float, window: float) -> None:
    """Raise ProtocolError saying what is wrong, or return if the stamp is good."""
    fields = stamp.split(":")
    if len(fields) != 7:
        raise ProtocolError(f"hashcash stamp must have 7 fields, not {len(fields)}")
    version, claimed, date, got_resource = fields[0], fields[1], fields[2], fields[3]
    if version != "1":
        raise ProtocolError(f"hashcash stamp version must be 1, not {version!r}")
    if not claimed.isdigit():
        raise ProtocolError(f"hashcash stamp has bad bits {claimed!r}")
    if int(claimed) < bits:
        raise ProtocolError(f"hashcash stamp claims {int(claimed)} bits, {bits} required")
    if got_resource != resource:
        raise ProtocolError("hashcash stamp is for another resource")
    when = stamp_date(date)
    # a date-only stamp covers the whole day, so allow a day of slack for it
    slack = 86400.0 if len(date) == 6 else 0.0
    if when + slack < now - window or when > now + window:
        raise ProtocolError("hashcash stamp is expired or from the future")
    zeros = leading_zero_bits(hashlib.sha1(stamp.encode("utf-8")).digest())
    if zeros < int(claimed):
        raise ProtocolError(f"hashcash stamp has {zeros} zero bits, claims {int(claimed)}")


def mint_stamp(resource: str, bits: int, now: float | None = None) -> str:
    """Make a stamp (for tests and clients); costs about 2**bits SHA-1 computations."""
    date = time.strftime("%y%m%d%H%M%S", time.gmtime(time.time() if now is None else now))
    prefix = f"1:{bits}:{date}:{resource}::{secrets.token_hex(8)}:"
    for counter in itertools.count():
        stamp = f"{prefix}{counter:x}"
        if leading_zero_bits(hashlib.sha1(stamp.encode()).digest()) >= bits:
            return stamp
    raise AssertionError("unreachable")
