"""Decoding a client frame into a message dict, and checking field types.

The reference drops the TCP connection on many malformed inputs (§2.6); here every one
becomes a `ProtocolError` whose `error` reply carries the original message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from pigeonhole.protocol.errors import (
    MISSING_TYPE,
    NOT_JSON,
    NOT_OBJECT,
    TOO_DEEP,
    TYPE_NOT_STRING,
    ProtocolError,
    must_be_string,
)


class FrameError(ProtocolError):
    """A frame that is not a typed JSON object; `orig` is what we could decode of it."""

    def __init__(self, explain: str, orig: object, ack: bool) -> None:
        super().__init__(explain)
        self.orig = orig
        #: whether the client still gets an `ack` before the error (only when typed)
        self.ack = ack


#: deepest JSON nesting accepted; replies echo values, and we must be able to encode them
MAX_DEPTH = 32


def _too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def decode_frame(data: str | bytes) -> dict[str, Any]:
    """JSON object with a string `type`, or FrameError."""
    try:
        msg = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise FrameError(NOT_JSON, _text(data), ack=False) from None
    # nesting needs one `{` or `[` per level: count them (in C) before walking in Python
    opens = (
        data.count("{") + data.count("[")
        if isinstance(data, str)
        else (data.count(b"{") + data.count(b"["))
    )
    if opens > MAX_DEPTH and _too_deep(msg):
        raise FrameError(TOO_DEEP, _text(data), ack=False)
    if not isinstance(msg, dict):
        raise FrameError(NOT_OBJECT, msg, ack=False)
    if "type" not in msg:
        raise FrameError(MISSING_TYPE, msg, ack=False)
    if not isinstance(msg["type"], str):
        raise FrameError(TYPE_NOT_STRING, msg, ack=True)
    return msg


def _text(data: str | bytes) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def string_field(msg: dict[str, Any], key: str) -> str:
    value = msg[key]
    if not isinstance(value, str):
        raise ProtocolError(must_be_string(key))
    return value


def optional_string(msg: dict[str, Any], key: str) -> str | None:
    value = msg.get(key)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(must_be_string(key))
    return value


def hex_body(msg: dict[str, Any]) -> str:
    """The `body` field, checked to be hex (either case: it is echoed verbatim)."""
    body = string_field(msg, "body")
    # fromhex (C) rejects non-hex digits and odd lengths but skips whitespace between
    # bytes, which the length check catches: valid means hex digits only, in pairs
    try:
        valid = len(bytes.fromhex(body)) * 2 == len(body)
    except ValueError:
        valid = False
    if not valid:
        raise ProtocolError("'body' must be a hex string")
    return body


def client_version(msg: dict[str, Any]) -> tuple[str | None, str | None]:
    """`[implementation, version]` stringified, extra elements ignored; else (None, None)."""
    value = msg.get("client_version")
    if isinstance(value, list | tuple) and len(value) >= 2:
        return str(value[0]), str(value[1])
    return None, None
