"""Strict RLP: canonical input only, like go-ethereum's decoder."""

from __future__ import annotations

import pytest

from pigeonhole.archive import rlp
from pigeonhole.archive.envelopes import decode_envelope


@pytest.mark.parametrize(
    ("item", "encoded"),
    [
        (b"", "80"),
        (b"\x00", "00"),
        (b"\x7f", "7f"),
        (b"\x80", "8180"),
        (b"dog", "83646f67"),
        ([], "c0"),
        ([b"cat", b"dog"], "c88363617483646f67"),
        (b"a" * 56, "b838" + "61" * 56),
        ([[], [[]], [[], [[]]]], "c7c0c1c0c3c0c1c0"),
    ],
)
def test_encode_decode_round_trip(item: rlp.Item, encoded: str) -> None:
    """Known encodings (Ethereum wiki examples) encode and decode both ways."""
    assert rlp.encode(item).hex() == encoded
    assert rlp.decode(bytes.fromhex(encoded)) == item


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("8100", "single byte below 0x80"),
        ("b80100", "long form for a short item"),
        ("b90000", "leading zero in length"),
        ("83646f", "exceeds available input"),
        ("c3836461", "exceeds available input"),
        ("8080", "trailing bytes"),
        ("", "unexpected end"),
    ],
)
def test_non_canonical_input_is_refused(data: str, why: str) -> None:
    """Each non-canonical or truncated input raises RlpError naming the problem."""
    with pytest.raises(rlp.RlpError, match=why):
        rlp.decode(bytes.fromhex(data))


def test_deep_nesting_is_refused() -> None:
    """Lists nested past MAX_DEPTH are refused rather than recursing without bound."""
    data = b"\xc0"
    for _ in range(rlp.MAX_DEPTH + 2):
        data = rlp.encode_raw_list([data])
    with pytest.raises(rlp.RlpError, match="nested deeper"):
        rlp.decode(data)


_T = bytes(4)
_D = bytes.fromhex("deadbeef")


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ([b"", b"\x01", _T, _D, b"\x01\x14", []], "expected 5 fields"),
        ([b"", b"\x01", _T[:3], _D, b"\x01\x14"], "Topic: expected 4 bytes"),
        ([b"\x00\x01", b"\x01", _T, _D, b"\x01\x14"], "leading zero"),
        ([b"\x01" + bytes(4), b"\x01", _T, _D, b""], "too large for uint32"),
        ([b"", b"\x01", _T, [], b""], "expected a byte string"),
        ([b"", b"\x01", _T, _D, b"\x01" * 9], "too large for uint64"),
    ],
)
def test_envelope_field_checks(fields: rlp.Encodable, why: str) -> None:
    """Envelopes with the wrong field count, topic size or integer form are refused."""
    with pytest.raises(rlp.RlpError, match=why):
        decode_envelope(rlp.encode(fields))


def test_integer_and_bool_readers() -> None:
    """as_uint rejects leading zeros and overflow; as_bool takes only 0x80 and 0x01."""
    assert rlp.as_uint(b"", "x", 32) == 0
    assert rlp.as_uint(b"\xff\xff\xff\xff", "x", 32) == 2**32 - 1
    with pytest.raises(rlp.RlpError):
        rlp.as_uint(b"\x01\x00\x00\x00\x00", "x", 32)
    assert rlp.as_bool(b"\x01", "b") is True
    assert rlp.as_bool(b"", "b") is False
    with pytest.raises(rlp.RlpError, match="invalid boolean"):
        rlp.as_bool(b"\x02", "b")
