"""Strict RLP (Ethereum's Recursive Length Prefix), as go-ethereum's `rlp` package reads it.

An item is a byte string or a list of items. Decoding is canonical-only, like Go's: a
single byte below 0x80 must stand for itself, the short form must be used below 56 bytes,
lengths have no leading zeros, and nothing may follow the top-level item. Integers are
minimal big-endian byte strings (0 is the empty string, `0x80`). Because only canonical
input decodes, re-encoding a decoded item gives back exactly the bytes received, so
hashes over either are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

#: a decoded RLP item: bytes, or a list of items
Item: TypeAlias = bytes | list["Item"]
#: what `encode` accepts: bytes, or any sequence of encodable items
Encodable: TypeAlias = bytes | Sequence["Encodable"]


#: nesting deeper than this is refused (no message here nests more than 4 levels)
MAX_DEPTH = 16


class RlpError(ValueError):
    """The input is not canonical RLP, or an item does not have the expected shape."""


def encode(item: Encodable) -> bytes:
    """Encode bytes or a (nested) sequence of bytes."""
    if isinstance(item, bytes | bytearray):
        data = bytes(item)
        if len(data) == 1 and data[0] < 0x80:
            return data
        return _prefix(len(data), 0x80) + data
    body = b"".join(encode(child) for child in item)
    return _prefix(len(body), 0xC0) + body


def encode_raw_list(encoded: Sequence[bytes]) -> bytes:
    """A list whose elements are already RLP-encoded (e.g. stored envelopes)."""
    body = b"".join(encoded)
    return _prefix(len(body), 0xC0) + body


def encode_uint(value: int) -> bytes:
    """The minimal big-endian form of a non-negative integer (0 -> b"")."""
    if value < 0:
        raise ValueError("RLP integers are unsigned")
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def encode_bool(value: bool) -> bytes:
    """Go's RLP booleans: true is the integer 1, false the integer 0."""
    return b"\x01" if value else b""


def decode(data: bytes) -> Item:
    """Decode exactly one item that spans all of `data`."""
    item, end = _decode_at(data, 0, 0)
    if end != len(data):
        raise RlpError(f"{len(data) - end} trailing bytes after the RLP item")
    return item


def as_bytes(item: Item, what: str) -> bytes:
    if not isinstance(item, bytes):
        raise RlpError(f"{what}: expected a byte string, got a list")
    return item


def as_list(item: Item, what: str) -> list[Item]:
    if not isinstance(item, list):
        raise RlpError(f"{what}: expected a list, got a byte string")
    return item


def as_uint(item: Item, what: str, bits: int) -> int:
    """Read an integer like Go does: no leading zero bytes, and it must fit `bits`."""
    raw = as_bytes(item, what)
    if raw[:1] == b"\x00":
        raise RlpError(f"{what}: non-canonical integer (leading zero bytes)")
    if len(raw) * 8 > bits:
        raise RlpError(f"{what}: integer too large for uint{bits}")
    return int.from_bytes(raw, "big")


def as_bool(item: Item, what: str) -> bool:
    raw = as_bytes(item, what)
    if raw not in (b"", b"\x01"):
        raise RlpError(f"{what}: invalid boolean value")
    return raw == b"\x01"


def _prefix(length: int, offset: int) -> bytes:
    if length < 56:
        return bytes([offset + length])
    size = encode_uint(length)
    return bytes([offset + 55 + len(size)]) + size


def _decode_at(data: bytes, pos: int, depth: int) -> tuple[Item, int]:
    """Decode the item starting at `pos`; return it and the position just after it."""
    if depth > MAX_DEPTH:
        raise RlpError(f"lists nested deeper than {MAX_DEPTH}")
    if pos >= len(data):
        raise RlpError("unexpected end of input")
    first = data[pos]
    if first < 0x80:
        return data[pos : pos + 1], pos + 1
    is_list = first >= 0xC0
    start, length = _header(data, pos, first - (0xC0 if is_list else 0x80))
    end = start + length
    if end > len(data):
        raise RlpError("value size exceeds available input length")
    if not is_list:
        if length == 1 and data[start] < 0x80:
            raise RlpError("non-canonical size information (single byte below 0x80)")
        return data[start:end], end
    items: list[Item] = []
    cursor = start
    while cursor < end:
        child, cursor = _decode_at(data, cursor, depth + 1)
        if cursor > end:
            raise RlpError("list element exceeds the list's size")
        items.append(child)
    return items, end


def _header(data: bytes, pos: int, kind: int) -> tuple[int, int]:
    """Return (payload start, payload length) for a string/list header byte."""
    if kind <= 55:
        return pos + 1, kind
    size_len = kind - 55
    size_bytes = data[pos + 1 : pos + 1 + size_len]
    if len(size_bytes) != size_len:
        raise RlpError("unexpected end of input in a length prefix")
    if size_bytes[0] == 0:
        raise RlpError("non-canonical size information (leading zero in length)")
    length = int.from_bytes(size_bytes, "big")
    if length < 56:
        raise RlpError("non-canonical size information (long form for a short item)")
    return pos + 1 + size_len, length
