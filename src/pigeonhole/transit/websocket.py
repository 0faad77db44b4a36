"""WebSocket transit: one already-upgraded connection, as the relay's endpoint.

The caller (the server's front door, or ws_listener.py in tests) answers the HTTP
upgrade, then calls `attach_websocket` with the transport and the bytes that followed the
request head. From there `websockets`' sans-I/O `Protocol` parses frames on the raw
transport (as the mailbox's sockets do): each binary frame's payload is stream bytes for
the core (fragments are not joined first; the handshake may span messages); text frames
are refused with close 1003. Bytes for the client leave as binary messages; the
transport's write buffer is the queue, and its high-water mark pauses the partner.
Closing sends a close frame after every queued byte and waits for the client's answer
as long as the client keeps reading: a slow receiver is never cut short.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Protocol, Side, State

from pigeonhole.transit.limits import Refusal
from pigeonhole.transit.owner import Owner
from pigeonhole.transit.party import Party

FRAMES_LOG = logging.getLogger("pigeonhole.transit.frames")
FRAMES_LOG.setLevel(logging.WARNING)

#: the largest frame taken from a client (bytes are a stream: clients send small ones)
MAX_FRAME_BYTES = 4 * 1024 * 1024


class TransitWebSocket(asyncio.Protocol):
    """One WebSocket transit client on a raw asyncio transport."""

    __slots__ = (
        "_close_code",
        "_close_reason",
        "_close_timeout",
        "_ended",
        "_gone",
        "_last_buffered",
        "_owner",
        "_timer",
        "_transport",
        "_ws",
        "party",
    )

    def __init__(
        self, transport: asyncio.Transport, owner: Owner, bound: int, close_timeout: float
    ) -> None:
        self._transport = transport
        self._owner = owner
        self._ws = Protocol(Side.SERVER, max_size=MAX_FRAME_BYTES, logger=FRAMES_LOG)
        self.party: Party | None = None
        self._ended = self._gone = False
        self._close_code = CloseCode.NORMAL_CLOSURE
        self._close_reason = ""
        self._close_timeout = close_timeout
        self._timer: asyncio.TimerHandle | None = None
        self._last_buffered = -1
        transport.set_write_buffer_limits(high=bound, low=bound // 4)

    # -- input ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._ws.receive_data(data)
        for frame in cast("list[Frame]", self._ws.events_received()):
            if self._ended:
                break
            if frame.opcode is Opcode.BINARY or frame.opcode is Opcode.CONT:
                if frame.data and self.party is not None:
                    self._owner.data(self.party, bytes(frame.data))
            elif frame.opcode is Opcode.TEXT:
                self._refuse_text()
            elif frame.opcode is Opcode.CLOSE:
                self._client_ended()
        self._flush()

    def _refuse_text(self) -> None:
        if self.party is not None and not self._ended:
            self._owner.refused(self.party, Refusal.TEXT_FRAME)
        self._close_code = CloseCode.UNSUPPORTED_DATA
        self._close_reason = "transit takes binary messages only"
        self._client_ended()

    def _client_ended(self) -> None:
        if not self._ended and self.party is not None:
            self._owner.eof(self.party)
        self._ended = True

    def eof_received(self) -> bool | None:
        self._ws.receive_eof()
        self._client_ended()
        self._flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = self._ended = True
        if self._timer is not None:
            self._timer.cancel()
        if self.party is not None:
            self._owner.gone(self.party)

    def resume_writing(self) -> None:
        if self.party is not None and not self._ended:
            self._owner.drained(self.party)

    # -- the endpoint --------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._ws.state is State.OPEN and not self._gone:
            self._ws.send_binary(data)
            self._flush()

    def buffered(self) -> int:
        return 0 if self._gone else self._transport.get_write_buffer_size()

    def pause_reading(self) -> None:
        if not self._gone:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if not self._gone:
            self._transport.resume_reading()

    def finish(self) -> None:
        """A close frame after every queued byte; the client's answer ends it."""
        self._ended = True
        if self._gone:
            return
        self.resume_reading()  # its close frame must be read
        if self._ws.state is State.OPEN:
            self._ws.send_close(self._close_code, self._close_reason)
            self._flush()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self._close_timeout, self._check_closing
            )

    def _check_closing(self) -> None:
        """Dropped once it has stopped reading (or read everything and not answered)."""
        size = self.buffered()
        if size and (self._last_buffered < 0 or size < self._last_buffered):
            self._last_buffered = size
            self._timer = asyncio.get_running_loop().call_later(
                self._close_timeout, self._check_closing
            )
            return
        self.abort()

    def refuse_now(self, kind: str) -> None:
        """Refused at the door (too many connections, draining): close 1013, try later."""
        self._ended = True
        self._ws.send_close(CloseCode.TRY_AGAIN_LATER, f"transit relay refused: {kind}")
        self._flush()
        self._timer = asyncio.get_running_loop().call_later(self._close_timeout, self.abort)

    def abort(self) -> None:
        if not self._gone:
            self._transport.abort()

    def _flush(self) -> None:
        chunks = self._ws.data_to_send()
        if not chunks or self._gone:
            return
        if b"" in chunks:  # the library's end of stream: the server closes TCP
            self._transport.writelines([chunk for chunk in chunks if chunk])
            self._transport.close()
        else:
            self._transport.writelines(chunks)
