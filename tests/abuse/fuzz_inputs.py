"""Seeded malformed inputs for every door of a running server, as raw bytes.

Each door's generator takes a `random.Random` and yields (kind, bytes) pairs: mutations of a
valid request (the shape a real client sends, with one part broken) and plain garbage. The
same seed gives the same inputs, so a failure names an input that can be replayed.
"""

from __future__ import annotations

import base64
import json
import os
import random
import struct
from collections.abc import Callable, Iterator

Input = tuple[str, bytes]

KEY = base64.b64encode(b"0123456789abcdef").decode()
UPGRADE = (
    f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    f"Sec-WebSocket-Key: {KEY}\r\n"
)

_METHODS = ["GET", "POST", "PUT", "HEAD", "OPTIONS", "DELETE", "PATCH", "CONNECT", "TRACE", "BREW"]
_TARGETS = [
    "/",
    "/health",
    "/metrics",
    "/v1",
    "/transit",
    "/whisper/v6",
    "/web/",
    "/web/../../etc/passwd",
    "/web/%00",
    "*",
    "http://127.0.0.1:4000",
    "http://127.0.0.1:4000/",
    "http://127.0.0.1:4000/v1",
    "http://[::1]",
    "https://x/health?x=1",
    "//",
    "/%",
    "/?" + "a" * 300,
    "/\u00e9".encode().decode("latin-1"),
]
_BAD_HEADER_VALUES = [
    "",
    " ",
    "\u00b2",
    "-1",
    "65536",
    "123456789012345678901234",
    "0x10",
    "1e3",
    "::1",
    "[::1]",
    "999.1.1.1",
    "1.2.3.4, garbage",
    "garbage",
    "1.2.3.4",
    "2001:db8::1",
    "\u0661\u0662",  # Arabic-Indic digits: str.isdigit() is true for them
]
_PROXY_HEADERS = ["X-Real-IP", "X-Real-Port", "X-Forwarded-For"]


def _latin1(text: str) -> bytes:
    return text.encode("utf-8")


def _random_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def _mutate(rng: random.Random, data: bytes) -> bytes:
    """Flip, drop, repeat or insert a few bytes of `data`."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        i = rng.randrange(len(out))
        action = rng.randrange(4)
        if action == 0:
            out[i] = rng.getrandbits(8)
        elif action == 1:
            del out[i]
        elif action == 2:
            out[i:i] = out[i : i + rng.randint(1, 8)] * rng.randint(1, 4)
        else:
            out[i:i] = rng.choice([b"\r\n", b"\r", b"\n", b":", b"\x00", b" ", b"\xff"])
    return bytes(out)


def _request(rng: random.Random, target: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"{rng.choice(_METHODS)} {target} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers]
    return _latin1("\r\n".join(lines) + "\r\n\r\n")


def http_inputs(rng: random.Random) -> Iterator[Input]:
    """Plain HTTP on the public port: odd methods and targets, broken heads and bodies."""
    while True:
        kind = rng.choice(["target", "header", "mutated", "body", "garbage", "version", "big"])
        if kind == "target":
            yield kind, _request(rng, rng.choice(_TARGETS), [])
        elif kind == "header":
            name = rng.choice([*_PROXY_HEADERS, "Content-Length", "Transfer-Encoding", "Accept"])
            yield (
                kind,
                _request(rng, rng.choice(_TARGETS), [(name, rng.choice(_BAD_HEADER_VALUES))]),
            )
        elif kind == "mutated":
            yield kind, _mutate(rng, _request(rng, rng.choice(_TARGETS), [("Accept", "*/*")]))
        elif kind == "body":
            body = _random_bytes(rng, rng.randint(0, 64))
            te = rng.choice(["chunked", "gzip, chunked", "identity", "chunked, chunked"])
            yield kind, _request(rng, "/whisper/v6", [("Transfer-Encoding", te)]) + body
        elif kind == "garbage":
            yield kind, _random_bytes(rng, rng.randint(1, 200)) + b"\r\n\r\n"
        elif kind == "version":
            version = rng.choice(["HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1.1x", "HTTPS/1.1", ""])
            yield kind, _latin1(f"GET / {version}\r\nHost: x\r\n\r\n")
        else:
            yield kind, _request(rng, "/", [("X-Big", "a" * rng.choice([9000, 20000, 70000]))])


def handshake_inputs(rng: random.Random, paths: list[str]) -> Iterator[Input]:
    """WebSocket upgrades at `paths` with one header broken (trusted-proxy ones included)."""
    while True:
        path = rng.choice(paths)
        kind = rng.choice(["proxy", "version", "key", "connection", "target", "mutated"])
        headers = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", KEY),
        ]
        target = path
        if kind == "proxy":
            for name in rng.sample(_PROXY_HEADERS, rng.randint(1, 3)):
                headers.append((name, rng.choice(_BAD_HEADER_VALUES)))
        elif kind == "version":
            headers[2] = ("Sec-WebSocket-Version", rng.choice(["", "8", "13, 8", "\u00b2", "99"]))
        elif kind == "key":
            headers[3] = ("Sec-WebSocket-Key", rng.choice(["", "short", "=" * 24, "\u00e9" * 24]))
        elif kind == "connection":
            headers[1] = ("Connection", rng.choice(["", "keep-alive", "upgrade, close"]))
        elif kind == "target":
            target = rng.choice([f"http://127.0.0.1{path}", "http://127.0.0.1", f"{path}?x=%", "*"])
        request = (
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "".join(f"{n}: {v}\r\n" for n, v in headers)
            + "\r\n"
        ).encode("utf-8")
        if kind == "mutated":
            request = _mutate(rng, request)
        yield kind, request


def frame(
    opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0, mask: bool = True
) -> bytes:
    """One WebSocket frame as a client sends it (masked unless told)."""
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _text(value: object) -> bytes:
    return frame(0x1, json.dumps(value).encode())


_ODD_VALUES: list[object] = [None, 1, -1, 2**70, 1.5, "", "x" * 300, [], {}, True, "\u00b2", "é"]
_TYPES = [
    "bind",
    "list",
    "allocate",
    "claim",
    "release",
    "open",
    "add",
    "close",
    "ping",
    "submit-permissions",
    "nonsense",
]
_FIELDS = ["appid", "side", "nameplate", "mailbox", "phase", "body", "mood", "ping", "id", "type"]


def frame_inputs(rng: random.Random) -> Iterator[Input]:
    """After a valid mailbox handshake: broken frames, broken JSON, commands of odd shape."""
    while True:
        kind = rng.choice(["frame", "utf8", "json", "command", "command", "garbage"])
        if kind == "frame":
            choice = rng.randrange(5)
            if choice == 0:
                data = frame(rng.choice([0x3, 0x4, 0x5, 0xB, 0xF]), b"{}")
            elif choice == 1:
                data = frame(0x1, b"{}", rsv=rng.randint(1, 7))
            elif choice == 2:
                data = frame(0x1, b'{"type":"ping","ping":1}', mask=False)
            elif choice == 3:
                data = frame(0x9, b"p" * 200)  # a control frame over 125 bytes
            else:
                data = frame(0x0, b"continuation without a start")
        elif kind == "utf8":
            data = frame(0x1, b'{"type":"ping","ping":"\xff\xfe"}')
        elif kind == "json":
            data = frame(0x1, _mutate(rng, b'{"type": "bind", "appid": "a", "side": "s"}'))
        elif kind == "command":
            message: dict[str, object] = {"type": rng.choice(_TYPES)}
            for name in rng.sample(_FIELDS, rng.randint(0, 4)):
                message[name] = rng.choice(_ODD_VALUES)
            data = _text(rng.choice([message, [message], "x", 1, None]))
        else:
            data = _random_bytes(rng, rng.randint(1, 40))
        yield kind, data


def transit_line_inputs(rng: random.Random) -> Iterator[Input]:
    """Handshake lines for the TCP relay: near-valid and garbage."""
    token = "a" * 64
    side = "b" * 16
    good = f"please relay {token} for side {side}\n".encode()
    while True:
        kind = rng.choice(["mutated", "garbage", "long", "http", "short"])
        if kind == "mutated":
            yield kind, _mutate(rng, good)
        elif kind == "garbage":
            yield kind, _random_bytes(rng, rng.randint(1, 120))
        elif kind == "long":
            yield kind, b"please relay " + b"a" * rng.choice([100, 5000, 70000]) + b"\n"
        elif kind == "http":
            yield kind, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        else:
            yield kind, b"please relay " + token.encode() + b"\n"


def rlp_inputs(rng: random.Random) -> Iterator[Input]:
    """Binary frames for the archive's WebSocket: RLP that is cut, oversized or garbage."""
    while True:
        kind = rng.choice(["garbage", "length", "nested", "text"])
        if kind == "garbage":
            payload = _random_bytes(rng, rng.randint(1, 80))
        elif kind == "length":
            payload = bytes([0xBF]) + b"\xff" * 8 + _random_bytes(rng, 4)
        elif kind == "nested":
            payload = bytes([0xF8, 0x40]) + bytes([0xC1]) * rng.randint(1, 64)
        else:
            yield kind, frame(0x1, _random_bytes(rng, 10).hex().encode())
            continue
        yield kind, frame(0x2, payload)


Generator = Callable[[random.Random], Iterator[Input]]
