"""The opening handshake of a mailbox WebSocket (RFC 6455 §4.2), as bytes in and bytes out.

Every exchange opens two connections, so the handshake is a fixed cost per exchange: here
the request head is parsed by `httptools` (llhttp, C), checked against the RFC's rules,
and answered from a template; `websockets` computes the accept key. No I/O: the front
door gives it the head and writes what it returns.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import httptools
from websockets.utils import accept_key

#: RFC 6455 §4.2.2: a server that does not speak the client's version says which it speaks
SUPPORTED_VERSION = "13"


@dataclass(slots=True)
class Head:
    """A parsed request head: method, path, and headers with lower-case names."""

    method: str
    path: str
    version: str
    headers: dict[str, str]
    #: the request target as sent, and in origin form (`/path?query`, RFC 9112 §3.2.1)
    target: bytes = b"/"
    origin_target: bytes = b"/"


class _Collector:
    """httptools callbacks: gather the URL and the headers."""

    __slots__ = ("headers", "url")

    def __init__(self) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        # a repeated header is one comma-separated list (RFC 9110 §5.3)
        previous = self.headers.get(key)
        self.headers[key] = text if previous is None else f"{previous}, {text}"


def parse_head(head: bytes) -> Head | None:
    """The request head (up to and including the blank line), or None if it is not HTTP."""
    collector = _Collector()
    parser = httptools.HttpRequestParser(collector)
    try:
        parser.feed_data(head)
    except httptools.HttpParserUpgrade:
        pass  # an Upgrade request: the parser stops after the head, as it should
    except httptools.HttpParserError:
        return None
    try:
        url = httptools.parse_url(collector.url)
    except httptools.HttpParserInvalidURLError:
        return None
    path = url.path
    origin = (path or b"/") + (b"?" + url.query if url.query is not None else b"")
    return Head(
        method=parser.get_method().decode("ascii", "replace"),
        # the absolute form (`GET http://host:port HTTP/1.1`, RFC 9112 §3.2.2) may have no
        # path: it names the origin's root, as `GET /` does
        path=path.decode("latin-1") if path else "/",
        version=parser.get_http_version(),
        headers=collector.headers,
        target=collector.url,
        origin_target=origin,
    )


def _tokens(value: str) -> set[str]:
    return {token.strip().lower() for token in value.split(",")}


def is_websocket_upgrade(head: Head) -> bool:
    """A GET that asks to upgrade to WebSocket (anything else is plain HTTP)."""
    return head.method == "GET" and "websocket" in _tokens(head.headers.get("upgrade", ""))


class HandshakeError(Exception):
    """The request cannot be accepted; `response` is the HTTP answer to send."""

    def __init__(self, response: bytes) -> None:
        super().__init__(response.split(b"\r\n", 1)[0].decode("latin-1"))
        self.response = response

    @property
    def kind(self) -> str:
        """What was wrong, in a few fixed words (the answer's text)."""
        return self.response.rsplit(b"\r\n\r\n", 1)[1].decode("utf-8").strip()


def accept(head: Head) -> bytes:
    """The 101 response for a valid upgrade (RFC 6455 §4.2.1), or HandshakeError."""
    headers = head.headers
    if head.version != "1.1":
        raise HandshakeError(reject(400, "WebSocket needs HTTP/1.1\n"))
    if "host" not in headers:
        raise HandshakeError(reject(400, "missing Host header\n"))
    if "upgrade" not in _tokens(headers.get("connection", "")):
        raise HandshakeError(reject(400, "Connection header must include Upgrade\n"))
    if headers.get("sec-websocket-version", "").strip() != SUPPORTED_VERSION:
        raise HandshakeError(
            reject(
                426,
                "unsupported WebSocket version\n",
                extra=f"Sec-WebSocket-Version: {SUPPORTED_VERSION}\r\n",
            )
        )
    key = headers.get("sec-websocket-key", "").strip()
    if not valid_key(key):
        raise HandshakeError(reject(400, "invalid Sec-WebSocket-Key\n"))
    # no extension (permessage-deflate) and no subprotocol is ever negotiated
    return (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept_key(key)}\r\n\r\n"
    ).encode("ascii")


def valid_key(key: str) -> bool:
    """RFC 6455 §4.2.1: base64 of 16 bytes (anything else, non-ASCII included, is not)."""
    try:
        return len(base64.b64decode(key.encode("ascii"), validate=True)) == 16
    except (binascii.Error, UnicodeEncodeError):
        return False


def reject(status: int, text: str, extra: str = "") -> bytes:
    """A short plain-text HTTP answer that closes the connection."""
    body = text.encode("utf-8")
    reason = _REASONS.get(status, "Error")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    ).encode("ascii") + body


_REASONS = {
    400: "Bad Request",
    426: "Upgrade Required",
    429: "Too Many Requests",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
