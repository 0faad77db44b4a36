"""Real relays and real clients on loopback for the transit tests.

`Relay` is Pigeonhole's relay (TCP and a WebSocket listener) in the test's loop; the
`Reference` is `twist transitrelay` (magic-wormhole-transit-relay 0.5.0) as a subprocess.
`TcpClient` and `WsClient` speak to either with the same methods, so one scenario runs
over both transports and both relays.

Outcomes are decided on events, never on a quiet while: a connection the relay closes is
read to its EOF (`ending`); one it keeps is shown to be kept by what it does next (a
waiting side answers bytes with `impatient`: `still_waiting`; a paired side passes bytes
to its partner). Timeouts here are bounds that fail a test, not decisions. Our relay's
clock is a `Clock` the test moves; `Relay.until` waits for a state of the relay, checked
whenever the relay has acted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from pigeonhole.transit import TransitConfig, TransitRelay, UsageRecord
from pigeonhole.transit.ws_listener import serve_websocket
from tests.support.process import Service, accepts_tcp, free_port

TWIST = Path(sys.executable).parent / "twist"
#: seconds a test waits at most for what must come (a bound: past it the test fails)
BOUND = 10.0
#: what a waiting side is told when it sends bytes before its partner came
IMPATIENT = b"impatient\n"


def token() -> str:
    return os.urandom(32).hex()


def side() -> str:
    return os.urandom(8).hex()


def line(tok: str, sid: str | None = None) -> bytes:
    if sid is None:
        return f"please relay {tok}\n".encode()
    return f"please relay {tok} for side {sid}\n".encode()


class Client(Protocol):
    async def send(self, data: bytes) -> None: ...
    async def read(self, timeout: float = BOUND) -> bytes | None: ...
    async def read_all(self, timeout: float = 30.0) -> bytes: ...
    async def read_exactly(self, size: int, timeout: float = 10.0) -> bytes: ...
    async def close(self) -> None: ...


class TcpClient:
    """A TCP client; `read` gives what came (b"" at EOF, None if nothing came in time)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        #: the most one `read` takes (a test makes a slow reader with a small one)
        self.read_size = 1 << 20

    @classmethod
    async def open(cls, port: int, source: str | None = None) -> TcpClient:
        """Connect to 127.0.0.1:`port`, from loopback address `source` if given."""
        local = None if source is None else (source, 0)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, limit=1 << 22, local_addr=local
        )
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read(self, timeout: float = BOUND) -> bytes | None:
        try:
            return await asyncio.wait_for(self.reader.read(self.read_size), timeout)
        except TimeoutError:
            return None
        except ConnectionError:
            return b""

    async def read_exactly(self, size: int, timeout: float = 10.0) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    async def read_all(self, timeout: float = 30.0) -> bytes:
        try:
            return await asyncio.wait_for(self.reader.read(), timeout)
        except ConnectionError:
            return b"<reset>"

    async def shutdown_write(self) -> None:
        self.writer.write_eof()

    async def close(self) -> None:
        if self.writer.is_closing():
            return
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


class WsClient:
    """A WebSocket client sending binary messages; the stream is their payloads."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, url: str, headers: dict[str, str] | None = None) -> WsClient:
        """`headers`: e.g. X-Real-IP, as a trusted proxy in front would set it."""
        ws = await connect(url, max_size=None, compression=None, additional_headers=headers)
        return cls(ws)

    async def send(self, data: bytes) -> None:
        await self.ws.send(data)

    async def read(self, timeout: float = BOUND) -> bytes | None:
        try:
            message = await asyncio.wait_for(self.ws.recv(), timeout)
        except TimeoutError:
            return None
        except ConnectionClosed:
            return b""
        return message if isinstance(message, bytes) else message.encode()

    async def read_exactly(self, size: int, timeout: float = 10.0) -> bytes:
        data = b""
        while len(data) < size:
            chunk = await self.read(timeout)
            assert chunk, f"ended after {len(data)} of {size} bytes"
            data += chunk
        return data

    async def read_all(self, timeout: float = 30.0) -> bytes:
        parts = []
        while True:
            chunk = await self.read(timeout)
            assert chunk is not None, "no EOF in time"
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)

    async def close(self) -> None:
        await self.ws.close()


async def ending(client: Client, timeout: float = BOUND) -> bytes:
    """What arrived before the relay closed the connection (it must, within `timeout`)."""
    got = b""
    while True:
        chunk = await client.read(timeout)
        assert chunk is not None, f"not closed by the relay ({got!r} came)"
        if not chunk:
            await client.close()  # as a real client does at EOF
            return got
        got += chunk


async def still_waiting(client: Client) -> bytes:
    """Bytes from a side that waits for its partner: the relay answers `impatient` and
    closes it. What arrived until then: IMPATIENT alone if nothing came before and the
    relay had kept it waiting (a closed side gets no answer, a paired one gets `ok`)."""
    await client.send(b"probe")
    return await ending(client)


class Clock:
    """Our relay's clock: real time plus an offset the test moves forward (`advance`)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class Relay:
    """Pigeonhole's relay with a WebSocket listener, in this loop; usage records kept."""

    def __init__(
        self, config: TransitConfig | None = None, splice: bool = True, clock: Clock | None = None
    ) -> None:
        self.records: list[UsageRecord] = []
        #: the relay's clock, moved by the test
        self.clock = clock or Clock()
        self.relay = TransitRelay(
            config or TransitConfig(), self.records.append, splice=splice, clock=self.clock
        )
        self.port = 0
        self.ws_url = ""
        self._ws_server: asyncio.Server | None = None

    async def __aenter__(self) -> Relay:
        await self.relay.start("127.0.0.1", [0])
        self.port = self.relay.ports[0]
        self._ws_server = await serve_websocket(self.relay, "127.0.0.1", 0)
        ws_port = self._ws_server.sockets[0].getsockname()[1]
        self.ws_url = f"ws://127.0.0.1:{ws_port}/transit"
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._ws_server is not None
        self._ws_server.close()
        await self.relay.stop(drain_timeout=1.0)

    async def tcp(self) -> TcpClient:
        return await TcpClient.open(self.port)

    async def ws(self) -> WsClient:
        return await WsClient.open(self.ws_url)

    def figures(self) -> dict[str, Any]:
        return self.relay.figures()

    def refusals(self) -> dict[str, int]:
        return dict(self.relay.figures()["refusals"])

    async def until(self, condition: Callable[[], bool], timeout: float = BOUND) -> None:
        """Wait until `condition()` holds of the relay (checked each time it has acted)."""
        assert await self.relay.hub.settled(condition, timeout), "not in time"

    async def settle(self, timeout: float = BOUND) -> None:
        """Wait until every connection the relay held is gone."""
        hub = self.relay.hub
        await self.until(lambda: not hub.live, timeout)

    async def waiting(self, count: int) -> None:
        """Wait until `count` sides wait for their partners."""
        core = self.relay.hub.core
        await self.until(lambda: core.waiting == count)

    async def connections(self, count: int) -> None:
        """Wait until the relay holds `count` connections."""
        core = self.relay.hub.core
        await self.until(lambda: core.connections == count)


def _tcp_sockets() -> list[tuple[int, int, str, int, int]]:
    """Every TCP socket of this network namespace, from /proc/net/tcp{,6}: local port,
    remote port, state (hex, "0A" listening, "01" established), send queue (bytes not yet
    acknowledged), receive queue (bytes not yet read)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                tx, rx = (int(n, 16) for n in fields[4].split(":"))
                local, remote = (int(a.rsplit(":", 1)[1], 16) for a in fields[1:3])
                found.append((local, remote, fields[3], tx, rx))
    return found


def listening(port: int) -> bool:
    """Whether a socket listens on TCP `port` (no connection made, which a relay would
    count and record)."""
    return any(local == port and state == "0A" for local, _, state, _, _ in _tcp_sockets())


def unread(ports: set[int]) -> int:
    """Bytes sent over loopback to the listeners on `ports` that they have not read yet
    (still in their connections' receive queues, or unacknowledged in their clients')."""
    total = 0
    for local, remote, state, tx, rx in _tcp_sockets():
        if state == "01":  # established
            total += rx if local in ports else tx if remote in ports else 0
    return total


class Reference:
    """`twist transitrelay` on free loopback ports (TCP and WebSocket), stopped by PID."""

    def __init__(self, workdir: Path) -> None:
        if not TWIST.exists():
            pytest.skip("the reference relay is not installed (scripts/setup --test does it)")
        self.port, ws_port = free_port(), free_port()
        self.ports = {self.port, ws_port}
        self.ws_url = f"ws://127.0.0.1:{ws_port}/"
        self.usage_db = workdir / "transit-usage.sqlite"
        argv = [
            str(TWIST), f"--log-file={workdir / 'transit.log'}", "transitrelay",
            f"--port=tcp:{self.port}:interface=127.0.0.1",
            f"--websocket=tcp:{ws_port}:interface=127.0.0.1",
            f"--usage-db={self.usage_db}",
        ]  # fmt: skip
        self.service = Service(
            argv,
            workdir / "transit.out",
            lambda: accepts_tcp(self.port) and accepts_tcp(ws_port),
            cwd=workdir,
            name="the reference relay",
        )
        self.service.start(timeout=30)

    def stop(self) -> None:
        self.service.stop(timeout=10)

    async def waiting(self, count: int) -> None:
        """The reference is a process we cannot look into: wait until it has read every
        byte sent to it. Its reactor handles what one read brought before it reads again,
        so a side sent next is handled after these (this orders sides)."""
        deadline = time.monotonic() + BOUND
        while unread(self.ports):
            assert time.monotonic() < deadline, "the reference relay left bytes unread"
            await asyncio.sleep(0.01)

    def moods(self) -> list[str]:
        with contextlib.closing(sqlite3.connect(self.usage_db)) as db:
            return [row[0] for row in db.execute("SELECT result FROM usage")]

    async def tcp(self) -> TcpClient:
        return await TcpClient.open(self.port)

    async def ws(self) -> WsClient:
        return await WsClient.open(self.ws_url)
