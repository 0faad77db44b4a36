"""The opening handshake as pure bytes: parsing the head, RFC 6455 §4.2.1 checks, answers."""

from __future__ import annotations

import base64
import hashlib

import pytest

from pigeonhole.server.handshake import (
    HandshakeError,
    Head,
    accept,
    is_websocket_upgrade,
    parse_head,
    reject,
)

KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's example key
EXPECTED_ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # and its accept value


def request(*, version: str = "1.1", method: str = "GET", path: str = "/v1", **drop: bool) -> bytes:
    headers = {
        "Host": "127.0.0.1:4000",
        "Upgrade": "websocket",
        "Connection": "keep-alive, Upgrade",
        "Sec-WebSocket-Key": KEY,
        "Sec-WebSocket-Version": "13",
    }
    lines = [f"{method} {path} HTTP/{version}"]
    lines += [f"{k}: {v}" for k, v in headers.items() if not drop.get(k.replace("-", "_"))]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def head_of(raw: bytes) -> Head:
    head = parse_head(raw)
    assert head is not None
    return head


def test_valid_upgrade_is_answered_with_the_rfc_accept_value() -> None:
    head = head_of(request())
    assert is_websocket_upgrade(head)
    response = accept(head)
    assert response.startswith(b"HTTP/1.1 101 ")
    assert f"Sec-WebSocket-Accept: {EXPECTED_ACCEPT}\r\n".encode() in response
    # the same value computed here from the RFC's rule
    digest = hashlib.sha1((KEY + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
    assert base64.b64encode(digest).decode() == EXPECTED_ACCEPT
    assert b"Sec-WebSocket-Extensions" not in response  # never permessage-deflate


def test_head_has_path_without_query_and_lower_case_headers() -> None:
    raw = request(path="/v1?a=b").replace(
        b"\r\n\r\n", b"\r\nX-Forwarded-For: 1.2.3.4\r\nx-forwarded-for: 5.6.7.8\r\n\r\n"
    )
    head = head_of(raw)
    assert head.path == "/v1" and head.method == "GET" and head.version == "1.1"
    assert head.headers["upgrade"] == "websocket"
    assert head.headers["x-forwarded-for"] == "1.2.3.4, 5.6.7.8"  # repeated: one list


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (request(version="1.0"), b"400"),
        (request(Host=True), b"400"),
        (request(Connection=True), b"400"),
        (request(Sec_WebSocket_Key=True), b"400"),
        (request().replace(KEY.encode(), b"c2hvcnQ="), b"400"),  # decodes to 5 bytes
        (request().replace(KEY.encode(), b"not base64!!"), b"400"),
        (request(Sec_WebSocket_Version=True), b"426"),
        (request().replace(b"Version: 13", b"Version: 8"), b"426"),
    ],
)
def test_invalid_upgrades_are_refused(raw: bytes, status: bytes) -> None:
    with pytest.raises(HandshakeError) as refused:
        accept(head_of(raw))
    assert refused.value.response.startswith(b"HTTP/1.1 " + status)
    if status == b"426":
        assert b"Sec-WebSocket-Version: 13\r\n" in refused.value.response


def test_not_an_upgrade() -> None:
    assert not is_websocket_upgrade(head_of(request(method="POST")))
    assert not is_websocket_upgrade(head_of(request(Upgrade=True)))


def test_garbage_is_not_http() -> None:
    assert parse_head(b"\x16\x03\x01 hello\r\n\r\n") is None


def test_reject_has_length_and_closes() -> None:
    response = reject(429, "too many\n")
    head, body = response.split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429 Too Many Requests")
    assert b"Content-Length: 9" in head and b"Connection: close" in head
    assert body == b"too many\n"


@pytest.mark.parametrize(
    ("target", "path", "origin"),
    [
        (b"http://127.0.0.1:4000", "/", b"/"),
        (b"http://127.0.0.1:4000/v1", "/v1", b"/v1"),
        (b"http://[::1]:4000/health?x=1", "/health", b"/health?x=1"),
        (b"/v1?a=b", "/v1", b"/v1?a=b"),
    ],
)
def test_absolute_form_is_read_as_the_origin_form(target: bytes, path: str, origin: bytes) -> None:
    """RFC 9112 §3.2.2: a server accepts the absolute form; no path is the root."""
    head = parse_head(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head is not None
    assert (head.path, head.origin_target, head.target) == (path, origin, target)


def test_a_non_ascii_key_is_refused_not_raised() -> None:
    head = parse_head(
        "GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ééééééééééééééééééééééé=\r\n\r\n".encode()
    )
    assert head is not None
    with pytest.raises(HandshakeError) as refused:
        accept(head)
    assert refused.value.kind == "invalid Sec-WebSocket-Key"
