"""The first bytes of every connection: mailbox WebSockets here, anything else to aiohttp.

The mailbox endpoint is where the load and the idle connections are, so its handshake is
answered here (websockets' `ServerProtocol` parses and checks it) and the connection then
runs on `MailboxSocket` without aiohttp's per-connection objects. Every other request
(`/`, `/health`, `/metrics`, the archive, a plain GET of the mailbox path) is handed, with
the bytes read so far, to aiohttp's own request handler on the same transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol, cast

from websockets.http11 import Request
from websockets.server import ServerProtocol

#: websockets logs every accepted handshake at INFO ("connection open"): a log record per
#: connection, a tenth of the loop's time under load. Our own close events say enough.
HANDSHAKE_LOG = logging.getLogger("pigeonhole.handshake")
HANDSHAKE_LOG.setLevel(logging.WARNING)

#: a request head longer than this is not a WebSocket handshake of ours: aiohttp answers it
MAX_HEAD_BYTES = 16 * 1024


class Acceptor(Protocol):
    """Takes a checked mailbox handshake; the connection is its own from there on."""

    def accept_websocket(
        self, transport: asyncio.Transport, handshake: ServerProtocol, request: Request, rest: bytes
    ) -> None: ...


class FrontDoor(asyncio.Protocol):
    __slots__ = ("_acceptor", "_buffer", "_http", "_path", "_transport")

    def __init__(
        self, acceptor: Acceptor, http: Callable[[], asyncio.Protocol], websocket_path: str
    ) -> None:
        self._acceptor = acceptor
        self._http = http
        self._path = websocket_path.encode("ascii")
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, but have its methods
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                self._to_http(buffer)
            else:
                self._buffer = buffer
            return
        self._buffer = b""
        head, rest = buffer[: end + 4], buffer[end + 4 :]
        if not self._is_mailbox_get(head):
            self._to_http(buffer)
            return
        handshake = ServerProtocol(max_size=None, logger=HANDSHAKE_LOG)
        handshake.receive_data(head)
        events = handshake.events_received()
        request = events[0] if events else None
        if not isinstance(request, Request) or not _is_upgrade(request):
            # not a WebSocket handshake: aiohttp answers it (or refuses it) as HTTP
            self._to_http(buffer)
            return
        assert self._transport is not None
        self._acceptor.accept_websocket(self._transport, handshake, request, rest)

    def _is_mailbox_get(self, head: bytes) -> bool:
        line = head[: head.find(b"\r\n")]
        parts = line.split(b" ")
        if len(parts) != 3 or parts[0] != b"GET":
            return False
        target = parts[1]
        return target == self._path or target.startswith(self._path + b"?")

    def _to_http(self, data: bytes) -> None:
        """Hand the connection, and what it sent so far, to aiohttp."""
        transport = self._transport
        assert transport is not None
        handler = self._http()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        handler.data_received(data)


def _is_upgrade(request: Request) -> bool:
    upgrade = request.headers.get("Upgrade", "")
    return "websocket" in upgrade.lower()
