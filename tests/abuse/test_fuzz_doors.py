"""A seeded, bounded fuzzer at every door of a live server, and the regressions it found.

Each input goes on a fresh loopback connection; the test then half-closes its side and reads
until the server closes. Every input must get a defined answer: an HTTP status line, a
WebSocket frame (a reply, an `error`, or a close with its RFC 6455 code), the relay's
`bad handshake` line, or a clean close; never a hang or a reset with nothing said. After
the run the server must be alive, serve a real transfer, have logged no traceback, and
count what it refused as `bad_input` by door and kind on /metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.abuse.abuse_support import get, metrics_url, running_server, transfer
from tests.abuse.fuzz_inputs import (
    UPGRADE,
    Input,
    frame,
    frame_inputs,
    handshake_inputs,
    http_inputs,
    rlp_inputs,
    transit_line_inputs,
)
from tests.support.process import free_port

pytestmark = pytest.mark.interop

SEED = 39
#: inputs tried at each door (the whole run takes well under a minute here)
PER_DOOR = {
    "http": 500,
    "handshake": 400,
    "frames": 400,
    "transit-tcp": 300,
    "transit-ws": 200,
    "archive": 200,
}
#: connections open at once
PARALLEL = 24
#: seconds one input may take to be answered
ANSWER_TIMEOUT = 10.0
#: seconds of silence after which the test half-closes (the input may be incomplete)
QUIET_WAIT = 1.0


class Target:
    def __init__(self, port: int, transit_port: int) -> None:
        self.port = port
        self.transit_port = transit_port


def _upgrade(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{UPGRADE}{extra}\r\n".encode()


async def _exchange(
    port: int, preamble: bytes, data: bytes, answered: Callable[[bytes], bool] = bool
) -> tuple[str, bytes]:
    """Send `preamble` (and read its answer's head), then `data`; read until `answered`
    holds for what came back or the server closes. A server still silent after
    `QUIET_WAIT` s (it waits for the rest of an incomplete input) is told that no more will
    come (half-close) and must then close.

    Returns (how it ended, what came after the preamble's answer): `answered`, `eof` (a
    clean close) or `reset`; a hang raises TimeoutError."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if preamble:
            writer.write(preamble)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101 "), head
        writer.write(data)
        out = b""
        told = False
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()  # (the server may have closed first: still read its answer)
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), None if told else QUIET_WAIT)
            except TimeoutError:
                told = True
                with contextlib.suppress(ConnectionError, OSError):
                    writer.write_eof()
                continue
            except ConnectionResetError:
                return "reset", out
            if not chunk:
                return "eof", out
            out += chunk
            if answered(out):
                return "answered", out
    finally:
        writer.close()


def _http_answered(how: str, out: bytes) -> str | None:
    """The answer's kind, or None if it is not one."""
    if out.startswith(b"HTTP/1.") and b"\r\n\r\n" in out:
        return f"http {out[9:12].decode('ascii', 'replace')}"
    if not out and how == "eof":
        return "clean close"
    return None


def _frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(opcode, payload) of each whole server frame (unmasked) in `data`."""
    at = 0
    while at + 2 <= len(data):
        opcode, length, start = data[at] & 0x0F, data[at + 1] & 0x7F, at + 2
        if length == 126:
            length, start = int.from_bytes(data[at + 2 : at + 4], "big"), at + 4
        elif length == 127:
            length, start = int.from_bytes(data[at + 2 : at + 10], "big"), at + 10
        if start + length > len(data):
            return
        yield opcode, data[start : start + length]
        at = start + length


def _ws_answered(how: str, out: bytes, skip: int = 0) -> str | None:
    """The first frame after `skip` frames (the mailbox's welcome), or a clean close."""
    for n, (opcode, payload) in enumerate(_frames(out)):
        if n < skip:
            continue
        if opcode == 0x8:
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
            return f"close {code}"
        if opcode == 0x1 and payload.startswith(b"{"):
            return f"text {json.loads(payload).get('type')}"
        return {0x1: "text", 0x2: "binary", 0x9: "ping", 0xA: "pong"}.get(opcode, "frame ?")
    return "clean close" if how == "eof" else None


def _inputs(door: str, target: Target, rng: random.Random) -> Iterator[tuple[int, bytes, Input]]:
    """(port, preamble, (kind, data)) for each input at `door`."""
    count = PER_DOOR[door]
    source: Iterator[Input]
    if door == "http":
        source, port, pre = http_inputs(rng), target.port, b""
    elif door == "handshake":
        source = handshake_inputs(rng, ["/v1", "/transit", "/whisper/v6"])
        port, pre = target.port, b""
    elif door == "frames":
        source, port, pre = frame_inputs(rng), target.port, _upgrade("/v1")
    elif door == "transit-tcp":
        source, port, pre = transit_line_inputs(rng), target.transit_port, b""
    elif door == "transit-ws":
        lines = transit_line_inputs(rng)
        source = ((kind, frame(0x2, data)) for kind, data in lines)
        port, pre = target.port, _upgrade("/transit")
    else:
        source, port, pre = rlp_inputs(rng), target.port, _upgrade("/whisper/v6")
    for _, item in zip(range(count), source, strict=False):
        yield port, pre, item


async def _fuzz(door: str, target: Target) -> tuple[Counter[str], list[str]]:
    """Every input at `door`: the answers seen, and the inputs not answered."""
    rng = random.Random(f"{SEED}-{door}")
    answers: Counter[str] = Counter()
    failures: list[str] = []
    gate = asyncio.Semaphore(PARALLEL)
    skip = 1 if door == "frames" else 0  # the mailbox's welcome comes first

    async def one(port: int, pre: bytes, kind: str, data: bytes) -> None:
        async with gate:
            judged = (
                (lambda out: _http_answered("", out) is not None)
                if door in ("http", "handshake")
                else (lambda out: _ws_answered("", out, skip) is not None)
                if door != "transit-tcp"
                else (lambda out: out.startswith((b"ok\n", b"bad handshake\n")))
            )
            try:
                exchange = _exchange(port, pre, data, judged)
                how, out = await asyncio.wait_for(exchange, ANSWER_TIMEOUT)
            except TimeoutError:
                failures.append(f"{door}/{kind}: no answer in {ANSWER_TIMEOUT} s to {data[:80]!r}")
                return
            if door == "transit-tcp":
                # a well-formed line pairs with another input's: `ok`, then its bytes
                answers_by_line = {b"bad handshake\n": "bad handshake", b"ok\n": "paired"}
                answer = answers_by_line.get(out[:3] if out.startswith(b"ok\n") else out)
                if answer is None and not out and how != "reset":
                    answer = "clean close"
            elif door in ("http", "handshake"):
                answer = _http_answered(how, out)
            else:
                answer = _ws_answered(how, out, skip)
            if answer is None:
                failures.append(f"{door}/{kind}: {how} after {out[:80]!r} for {data[:80]!r}")
            else:
                answers[answer] += 1

    await asyncio.gather(*(one(p, pre, k, d) for p, pre, (k, d) in _inputs(door, target, rng)))
    return answers, failures


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Target, Path]]:
    transit_port = free_port()
    data = tmp_path / "data"
    with running_server(data, "--transit-port", str(transit_port), "--log-level", "INFO") as (
        url,
        _pid,
    ):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        yield url, Target(port, transit_port), data.with_suffix(".log")


def _bad_input(metrics: str) -> dict[tuple[str, str], int]:
    found = {}
    for door, kind, value in re.findall(
        r'^pigeonhole_bad_input_total\{door="([^"]*)",kind="([^"]*)"\} (\d+)', metrics, re.M
    ):
        found[(door, kind)] = int(value)
    return found


async def test_every_door_answers_every_input(server: tuple[str, Target, Path]) -> None:
    url, target, log = server
    report: dict[str, Counter[str]] = {}
    failures: list[str] = []
    for door in PER_DOOR:
        answers, failed = await _fuzz(door, target)
        report[door] = answers
        failures += failed
    print(json.dumps({door: dict(a) for door, a in report.items()}, indent=1))
    kinds = Counter(f.split(":", 1)[0] for f in failures)
    assert not failures, f"{dict(kinds)}\n" + "\n".join(failures[:20])
    # each door answered in more than one way: the inputs reached past the first check
    for door, answers in report.items():
        assert sum(answers.values()) == PER_DOOR[door]
        assert len(answers) >= 2, (door, answers)
    # alive, and a real client is served afterwards
    assert get(f"http://127.0.0.1:{target.port}/health") == "ok\n"
    sent, received, text = await transfer(url, "after the fuzzer")
    assert (sent, received, text) == (0, 0, "after the fuzzer")
    # what was refused is counted by door and kind
    counted = _bad_input(get(metrics_url(url)))
    doors = {door for door, _ in counted}
    assert {"http", "handshake", "proxy-header", "websocket", "transit"} <= doors, counted
    status = json.loads(get(metrics_url(url).replace("/metrics", "/status.json")))
    assert status["bad_input"], status.keys()
    logged = log.read_text()
    assert "Traceback" not in logged, logged[logged.find("Traceback") - 400 :][:3000]


# -- the regressions the fuzzer found ------------------------------------------------------


def _first_frame(answer: bytes) -> bytes:
    """The payload of the first (unmasked, server) frame after a 101's head."""
    data = answer[answer.index(b"\r\n\r\n") + 4 :]
    length, at = data[1] & 0x7F, 2
    if length == 126:
        length, at = int.from_bytes(data[2:4], "big"), 4
    return data[at : at + length]


def _raw(port: int, data: bytes) -> bytes:
    return asyncio.run(_exchange(port, b"", data))[1]


def test_absolute_form_is_the_origin_form(server: tuple[str, Target, Path]) -> None:
    """RFC 9112 §3.2.2: `GET http://host:port HTTP/1.1` is `GET /`, with or without upgrade."""
    _url, target, log = server
    plain = _raw(
        target.port, f"GET http://127.0.0.1:{target.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    assert plain.startswith(b"HTTP/1.1 200 "), plain
    assert plain.endswith(b"Wormhole Relay\n")
    mailbox = _raw(target.port, _upgrade(f"http://127.0.0.1:{target.port}/v1"))
    assert mailbox.startswith(b"HTTP/1.1 101 "), mailbox
    assert b'"type":"welcome"' in mailbox
    # an upgrade at the absolute root is not a mailbox: answered as HTTP, not dropped
    root = _raw(target.port, _upgrade(f"http://127.0.0.1:{target.port}"))
    assert root.startswith(b"HTTP/1.1 "), root
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(
    ("port", "shown"),
    [
        ("\u00b2", None),  # str.isdigit() accepts it, int() does not
        ("\u0661\u0662", None),
        ("123456789012345678901234", None),  # past a 64-bit integer: the welcome must encode
        ("65536", None),
        ("-1", None),
        ("4242", 4242),
    ],
)
def test_trusted_proxy_port_is_parsed_strictly(
    server: tuple[str, Target, Path], port: str, shown: int | None
) -> None:
    """A bad X-Real-Port is treated as absent (and counted): the client gets its welcome."""
    url, target, log = server
    answer = _raw(
        target.port, _upgrade("/v1", f"X-Real-IP: 198.51.100.7\r\nX-Real-Port: {port}\r\n")
    )
    assert answer.startswith(b"HTTP/1.1 101 "), answer
    welcome = json.loads(_first_frame(answer))
    address = welcome["welcome"]["your-address"]
    assert address.get("ipv4") == "198.51.100.7"
    assert address.get("port") == shown
    counted = _bad_input(get(metrics_url(url)))
    assert (counted.get(("proxy-header", "x-real-port"), 0) > 0) == (shown is None)
    assert "Traceback" not in log.read_text()


def test_malformed_http_is_one_line_per_interval(server: tuple[str, Target, Path]) -> None:
    """aiohttp's refusals are summarised like the server's own: no traceback per request."""
    url, target, log = server
    for _ in range(50):
        answer = _raw(target.port, b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n")
        assert answer.startswith(b"HTTP/1.") and answer[9:12] == b"400", answer
    text = log.read_text()
    assert "Traceback" not in text
    assert sum("Content-Length" in line for line in text.splitlines()) <= 1, text
    counted = _bad_input(get(metrics_url(url)))
    assert sum(v for (door, _), v in counted.items() if door == "http") >= 50, counted
    with urllib.request.urlopen(f"http://127.0.0.1:{target.port}/health", timeout=5) as health:
        assert health.status == 200
