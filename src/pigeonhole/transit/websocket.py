"""WebSocket transit: one already-upgraded connection, as the relay's endpoint.

The caller (the server's front door, or ws_listener.py for the relay alone) answers the
HTTP upgrade, then calls `attach_websocket` with the transport and the bytes that followed
the request head. Bytes are a stream, so data frames are not assembled into messages: each
read's data-frame payload is unmasked (websockets' C `apply_mask`) piece by piece as it
arrives, and handed to the core, a frame split over reads in several pieces, several
frames in one read as several pieces. This is the transit relay's hot path, so it is
parsed here, without a `Frame` object or a copy per frame. Everything else goes to
`websockets`' sans-I/O `Protocol`, which keeps the connection's state: each control frame
(close, ping, pong) is fed to it whole, and on anything unusual (reserved bits, an
unmasked frame, an unknown opcode, an over-long control frame) it takes the rest of the
connection and fails it as the RFC says. A continuation frame with no message begun, or a
new message before the last ended, fails it with 1002 (protocol error); a frame over
MAX_FRAME_BYTES with 1009; text frames are refused with close 1003. Bytes for the client
leave as binary frames: a prebuilt header and the bytes themselves, written together,
never copied into a frame first. The transport's write buffer is the queue, and its
high-water mark pauses the partner. Closing sends a close frame after every queued byte
and waits for the client's answer as long as the client keeps reading: a slow receiver is
never cut short.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import cast

from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Protocol, Side, State

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - a build of websockets without its C extension
    from websockets.utils import apply_mask

from pigeonhole.transit.limits import Refusal
from pigeonhole.transit.owner import Owner
from pigeonhole.transit.party import Party

FRAMES_LOG = logging.getLogger("pigeonhole.transit.frames")
FRAMES_LOG.setLevel(logging.WARNING)

#: the largest frame taken from a client (bytes are a stream: clients send small ones)
MAX_FRAME_BYTES = 4 * 1024 * 1024
#: the first byte of a frame: FIN and the opcode
_BINARY, _CONT, _TEXT = 0x2, 0x0, 0x1
_HEAD16 = struct.Struct("!BBH")
_HEAD64 = struct.Struct("!BBQ")


def binary_head(size: int) -> bytes:
    """The header of an unmasked (server) binary frame of `size` bytes, FIN set."""
    if size < 126:
        return bytes((0x82, size))
    if size < 65536:
        return _HEAD16.pack(0x82, 126, size)
    return _HEAD64.pack(0x82, 127, size)


class TransitWebSocket(asyncio.Protocol):
    """One WebSocket transit client on a raw asyncio transport."""

    __slots__ = (
        "_close_code",
        "_close_reason",
        "_close_timeout",
        "_ended",
        "_gone",
        "_held",
        "_in_message",
        "_last_buffered",
        "_left",
        "_library",
        "_mask",
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
        #: the parser: payload bytes left in the current data frame, its mask (turned to
        #: line up with the next byte), a header or control frame not complete yet, a
        #: fragmented message begun, and whether `Protocol` now parses everything
        self._left = 0
        self._mask = b""
        self._held = b""
        self._in_message = False
        self._library = False
        transport.set_write_buffer_limits(high=bound, low=bound // 4)

    # -- input ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._library:
            self._ws.receive_data(data)
            self._events()
            self._flush()
            return
        if self._held:
            data = self._held + data
            self._held = b""
        view = memoryview(data)
        pieces: list[bytes] = []  # unmasked payload, handed on together (one write)
        pos, end = 0, len(data)
        while pos < end:
            left = self._left
            if left:  # payload of a data frame
                stop = pos + left if pos + left < end else end
                size = stop - pos
                self._left = left - size
                mask = self._mask
                if not self._ended:
                    pieces.append(apply_mask(view[pos:stop], mask))
                if self._left and size % 4:
                    turn = size % 4
                    self._mask = mask[turn:] + mask[:turn]
                pos = stop
                continue
            pos = self._header(data, pos, end, pieces)
            if pos < 0:
                break
        self._deliver(pieces)
        self._flush()

    def _deliver(self, pieces: list[bytes]) -> None:
        """Hand the payload read so far to the relay (before any control frame's effect)."""
        if not pieces:
            return
        party = self.party
        if not self._ended and party is not None:
            if len(pieces) == 1:
                self._owner.data(party, pieces[0])
            else:
                self._owner.pieces(party, pieces[:])
        pieces.clear()

    def _header(self, data: bytes, pos: int, end: int, pieces: list[bytes]) -> int:
        """Parse the frame header at `pos`: where its payload starts (or the next frame's,
        after a control frame), or -1 when this read holds no more of the stream."""
        if end - pos < 2:
            self._held = data[pos:]
            return -1
        b0, b1 = data[pos], data[pos + 1]
        opcode, size = b0 & 0x0F, b1 & 0x7F
        if b0 & 0x70 or not b1 & 0x80 or 2 < opcode < 8 or opcode > 10:
            self._deliver(pieces)
            return self._to_library(data[pos:])  # reserved bits, not masked, no such opcode
        start = pos + 6
        if size == 126:
            start = pos + 8
            if end >= start:
                size = int.from_bytes(data[pos + 2 : pos + 4], "big")
        elif size == 127:
            start = pos + 14
            if end >= start:
                size = int.from_bytes(data[pos + 2 : pos + 10], "big")
        if opcode >= 8:  # close, ping, pong: to the library, whole
            self._deliver(pieces)
            if size > 125:
                return self._to_library(data[pos:])
            if end < start + size:
                self._held = data[pos:]
                return -1
            self._ws.receive_data(data[pos : start + size])
            self._events()
            if self._library:  # closing: the library reads the rest (the close answer)
                return self._to_library(data[start + size :])
            return start + size
        if end < start:
            self._held = data[pos:]
            return -1
        if opcode == _TEXT and not self._ended:
            self._deliver(pieces)
            self._refuse_text()
        if (opcode == _CONT) is not self._in_message:
            self._deliver(pieces)
            wrong = "unexpected continuation" if opcode == _CONT else "expected a continuation"
            return self._fail(CloseCode.PROTOCOL_ERROR, f"{wrong} frame")
        if size > MAX_FRAME_BYTES:
            self._deliver(pieces)
            return self._fail(CloseCode.MESSAGE_TOO_BIG, f"frame over {MAX_FRAME_BYTES} bytes")
        self._in_message = not b0 & 0x80
        self._mask = data[start - 4 : start]
        self._left = size
        return start

    def _to_library(self, rest: bytes) -> int:
        """`Protocol` parses the rest of the connection (it fails it, or discards it)."""
        self._library = True
        if rest:
            self._ws.receive_data(rest)
            self._events()
        return -1

    def _fail(self, code: CloseCode, reason: str) -> int:
        self._library = True
        if self._ws.state is State.OPEN:
            self._ws.fail(code, reason)
        return -1

    def _events(self) -> None:
        """The library's events: a control frame, or a frame it failed the connection for."""
        for frame in cast("list[Frame]", self._ws.events_received()):
            if frame.opcode is Opcode.CLOSE:
                self._client_ended()
            elif frame.opcode is Opcode.TEXT and not self._ended:
                self._refuse_text()
        if self._ws.state is not State.OPEN:
            self._library = True

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
            self._transport.writelines((binary_head(len(data)), data))

    def write_pieces(self, pieces: list[bytes], size: int) -> None:
        """Several pieces as one frame: its header and the pieces in one write, no join."""
        if self._ws.state is State.OPEN and not self._gone:
            self._transport.writelines([binary_head(size), *pieces])

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
