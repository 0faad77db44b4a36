"""A small standalone WebSocket listener for the relay alone: `python -m pigeonhole.transit
--ws-port`, the benchmark's relay alone, and the transit tests.

The server proper answers the upgrade in its front door (server/transit.py), which this
package may not import (it stands on its own); this listener does the same job alone: it
reads the request head, lets `websockets`' sans-I/O `ServerProtocol` check it and write
the 101 answer, then attaches the transport to the relay with the bytes that followed the
head. Any URL path is accepted, as the reference's relay does.
"""

from __future__ import annotations

import asyncio
from typing import cast

from websockets.http11 import Request
from websockets.server import ServerProtocol

from pigeonhole.transit.relay import TransitRelay

MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT = 10.0


class _Upgrade(asyncio.Protocol):
    """Until the request head is complete and answered."""

    def __init__(self, relay: TransitRelay) -> None:
        self._relay = relay
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(HEAD_TIMEOUT, self._transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                transport.abort()
            return
        if self._timer is not None:
            self._timer.cancel()
        head, rest = self._buffer[: end + 4], self._buffer[end + 4 :]
        protocol = ServerProtocol()
        protocol.receive_data(head)
        events = protocol.events_received()
        if not events or not isinstance(events[0], Request):
            transport.abort()
            return
        response = protocol.accept(events[0])
        protocol.send_response(response)
        transport.writelines(protocol.data_to_send())
        if response.status_code != 101:
            transport.close()
            return
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if peer else "unknown"
        self._relay.attach_websocket(transport, self._relay.address_key(address), rest)


async def serve_websocket(relay: TransitRelay, host: str, port: int) -> asyncio.Server:
    """Listen for WebSocket transit on (host, port) (0: any free port) for `relay`."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Upgrade(relay), host, port)
