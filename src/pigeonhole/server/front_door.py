"""The first bytes of every connection: mailbox WebSockets here, anything else to aiohttp.

The mailbox endpoint is where the load and the idle connections are, so its handshake is
answered here (`handshake.py`) and the connection then runs on `MailboxSocket` without
aiohttp's per-connection objects; a WebSocket upgrade at the transit path goes to the
relay the same way (server/transit.py). Every other request
(`/`, `/health`, `/metrics`, the archive, a plain GET of the mailbox path) is handed, with
the bytes read so far, to aiohttp's own request handler on the same transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol, cast

from pigeonhole.server.bad_input import BadInput
from pigeonhole.server.handshake import Head, is_websocket_upgrade, parse_head, reject

log = logging.getLogger("pigeonhole.server")

#: what this listener speaks (HTTP/2 is negotiated by TLS ALPN or a preface, neither here)
HTTP_VERSIONS = ("1.0", "1.1")
#: a request head longer than this is not a WebSocket handshake of ours: aiohttp answers it
MAX_HEAD_BYTES = 16 * 1024


class Acceptor(Protocol):
    """Takes a checked mailbox handshake; the connection is its own from there on."""

    def accept_websocket(self, transport: asyncio.Transport, head: Head, rest: bytes) -> None: ...

    def accept_transit(self, transport: asyncio.Transport, head: Head, rest: bytes) -> None:
        """A WebSocket upgrade at the transit relay's path (server/transit.py)."""


class FrontDoor(asyncio.Protocol):
    """Until the request head is complete; a client that never finishes it is dropped."""

    __slots__ = (
        "_acceptor",
        "_bad",
        "_buffer",
        "_http",
        "_path",
        "_timeout",
        "_timer",
        "_transit_path",
        "_transport",
    )

    def __init__(
        self,
        acceptor: Acceptor,
        http: Callable[[], asyncio.Protocol],
        websocket_path: str,
        timeout: float,
        transit_path: str | None,
        bad: BadInput,
    ) -> None:
        self._acceptor = acceptor
        self._bad = bad
        self._http = http
        self._path = websocket_path
        #: WebSocket transit's path (None: no relay served here)
        self._transit_path = transit_path
        self._timeout = timeout
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, but have its methods
        self._transport = cast(asyncio.Transport, transport)
        # a connection that sends no complete head in time holds a socket for nothing
        self._timer = asyncio.get_running_loop().call_later(self._timeout, self._transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def data_received(self, data: bytes) -> None:
        try:
            self._received(data)
        except Exception as exc:  # a bug of ours: the client still gets an answer
            if self._bad.unexpected("handshake", exc):
                log.error("handshake failed on an unexpected error", exc_info=exc)
            transport = self._transport
            if transport is not None and not transport.is_closing():
                transport.write(reject(400, "malformed request\n"))
                transport.close()

    def _received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                self._to_http(buffer)
            else:
                self._buffer = buffer
            return
        self._buffer = b""
        self._stop_timer()
        head = parse_head(buffer[: end + 4])
        if head is not None and head.version not in HTTP_VERSIONS:
            # `GET / HTTP/2.0` in text is no HTTP/2 (that needs its preface); aiohttp would
            # answer it as `HTTP/2.0 200`, which no client can read (RFC 9110 §6.2)
            self._bad.note("http", "HTTP version", head.version)
            assert self._transport is not None
            self._transport.write(reject(505, "HTTP/1.1 only\n"))
            self._transport.close()
            return
        if head is None or not is_websocket_upgrade(head):
            # not a WebSocket handshake: aiohttp answers it (or refuses it) as HTTP
            self._to_http(buffer if head is None else _in_origin_form(buffer, head))
            return
        assert self._transport is not None
        if head.path == self._path:
            self._acceptor.accept_websocket(self._transport, head, buffer[end + 4 :])
        elif head.path == self._transit_path:
            self._acceptor.accept_transit(self._transport, head, buffer[end + 4 :])
        else:
            self._to_http(_in_origin_form(buffer, head))

    def _to_http(self, data: bytes) -> None:
        """Hand the connection, and what it sent so far, to aiohttp."""
        self._stop_timer()
        transport = self._transport
        assert transport is not None
        handler = self._http()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        handler.data_received(data)


def _in_origin_form(request: bytes, head: Head) -> bytes:
    """`request` with its target in origin form: RFC 9112 §3.2.2 has a server accept the
    absolute form (`GET http://host:port/health`), which aiohttp routes only with a path."""
    if head.target == head.origin_target or head.target.startswith(b"/"):
        return request
    method, _, rest = request.partition(b" ")
    target, _, rest = rest.partition(b" ")
    if target != head.target:  # not the simple `METHOD TARGET VERSION` line: leave it
        return request
    return b"%s %s %s" % (method, head.origin_target, rest)
