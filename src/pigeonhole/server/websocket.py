"""One mailbox WebSocket on the raw transport: websockets' sans-I/O core, no task.

aiohttp gave every connection a request handler, a reader queue and a task woken for each
frame: most of an idle connection's memory, and a task switch per message. Here the
transport calls `data_received`, each message goes straight to the connection's protocol
step, and the replies it queued leave as one write per batch (`flush`). The WebSocket
protocol itself (framing, unmasking, size limit, ping/pong, the close handshake) is the
`websockets` library's sans-I/O `Protocol`; this module only moves its bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import typing
from typing import cast

from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Protocol, Side, State

from pigeonhole.server.outbox import BEHIND_BYTES


class FrameHandler(typing.Protocol):
    """The connection a socket hands its messages to (connection.py's Connection)."""

    def handle_frame(self, data: str | bytes) -> None: ...
    def bad_frame(self, kind: str) -> None: ...
    def connection_lost(self) -> None: ...
    def fell_behind(self) -> None:
        """A write left more than BEHIND_BYTES in the transport's buffer."""


#: websockets' per-connection log lines (INFO and below) are not wanted here
FRAMES_LOG = logging.getLogger("pigeonhole.frames")
FRAMES_LOG.setLevel(logging.WARNING)

_TEXT, _BINARY, _CONT, _CLOSE = Opcode.TEXT, Opcode.BINARY, Opcode.CONT, Opcode.CLOSE
_OPEN = State.OPEN


class MailboxSocket(asyncio.Protocol):
    """The transport's protocol once the handshake is done; `conn` gets whole messages."""

    # slots: one per connection, so its size is memory per idle connection
    __slots__ = (
        "_accepting",
        "_batch",
        "_fragments",
        "_gone",
        "_heard",
        "_pinged",
        "_transport",
        "_waiter",
        "_ws",
        "conn",
    )

    def __init__(self, transport: asyncio.Transport, max_size: int) -> None:
        self._transport = transport
        self._ws = Protocol(Side.SERVER, max_size=max_size, logger=FRAMES_LOG)
        self.conn: FrameHandler | None = None
        #: a fragmented message being reassembled: (is text, parts)
        self._fragments: tuple[bool, list[bytes]] | None = None
        #: messages are served (false once either side's close frame has gone by)
        self._accepting = True
        #: depth of `begin()` calls: inside one, writes wait for the outermost `end()`
        self._batch = 0
        #: anything received since the last heartbeat sweep; a ping is unanswered
        self._heard = True
        self._pinged = False
        #: the transport is lost; and a future for whoever waits for that (made on demand)
        self._gone = False
        self._waiter: asyncio.Future[None] | None = None

    # -- input ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        ws = self._ws
        # messages that came before the peer's close frame, in the same read, are served
        # (a client may send `close` and hang up at once); none after ours or theirs
        self._accepting = ws.state is _OPEN
        failed = ws.parser_exc
        ws.receive_data(data)
        if ws.parser_exc is not failed and ws.parser_exc is not None and self.conn is not None:
            # a frame RFC 6455 forbids: the library closes with its code; counted here
            self.conn.bad_frame(type(ws.parser_exc).__name__)
        self._heard = True
        self.begin()  # every reply to this read leaves in one write
        try:
            # after the handshake the protocol yields only frames, whose data is bytes
            for frame in cast("list[Frame]", ws.events_received()):
                opcode = frame.opcode
                payload = cast(bytes, frame.data)
                if opcode is _TEXT or opcode is _BINARY:
                    if frame.fin:
                        self._message(payload, opcode is _TEXT)
                    else:
                        self._fragments = (opcode is _TEXT, [payload])
                elif opcode is _CONT and self._fragments is not None:
                    text, parts = self._fragments
                    parts.append(payload)
                    if frame.fin:
                        self._fragments = None
                        self._message(b"".join(parts), text)
                elif opcode is _CLOSE:
                    self._accepting = False
                # pings are answered and close frames echoed by the library
        finally:
            self.end()

    def _message(self, data: bytes, text: bool) -> None:
        conn = self.conn
        if conn is None or not self._accepting:
            return
        if text:
            try:
                conn.handle_frame(data.decode())
            except UnicodeDecodeError:
                # RFC 6455 §8.1: a text message that is not UTF-8 fails the connection
                conn.bad_frame("invalid UTF-8")
                self._ws.fail(CloseCode.INVALID_DATA, "invalid UTF-8")
                self._accepting = False
            return
        conn.handle_frame(data)

    def eof_received(self) -> bool | None:
        self._ws.receive_eof()
        self.flush()
        return None  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        conn, self.conn = self.conn, None  # no cycle left between the two
        if conn is not None:
            conn.connection_lost()
        # the protocol's parser is a generator that holds the protocol: ended, the two are
        # no reference cycle (nothing is parsed once the transport is gone)
        self._ws.parser.close()

    # -- output --------------------------------------------------------------------

    @property
    def open(self) -> bool:
        """Frames can still be sent (no close sent or received, transport not lost)."""
        return self._ws.state is _OPEN and not self._gone

    def send_text(self, data: bytes) -> None:
        """Queue one text frame (UTF-8 `data`); it leaves at the next `flush`."""
        self._ws.send_text(data)
        if not self._batch:
            self.flush()

    def begin(self) -> None:
        """Hold writes until the matching `end`: frames queued between leave in one write."""
        self._batch += 1

    def end(self, preamble: bytes = b"") -> None:
        """End a `begin`; `preamble` (the handshake's answer) goes out before the frames."""
        self._batch -= 1
        if not self._batch:
            self.flush(preamble)

    def flush(self, preamble: bytes = b"") -> None:
        """Write what the protocol has queued; close the transport when it says so.

        Every write to the transport is made here, so this is where a client that does
        not read is first seen: a write that leaves more than BEHIND_BYTES unsent tells
        the connection (the slow-reader sweep then watches it).
        """
        chunks = self._ws.data_to_send()
        if preamble:
            chunks.insert(0, preamble)
        if not chunks or self._gone:
            return
        transport = self._transport
        if b"" in chunks:  # the library's end-of-stream mark: the server closes TCP first
            transport.writelines([chunk for chunk in chunks if chunk])
            transport.close()
        elif len(chunks) == 1:
            transport.write(chunks[0])
        else:
            transport.writelines(chunks)
        if transport.get_write_buffer_size() > BEHIND_BYTES and self.conn is not None:
            self.conn.fell_behind()

    def write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    # -- closing and liveness ------------------------------------------------------

    async def close(self, code: int, reason: str, timeout: float) -> None:
        """Close handshake: send a close frame, wait (bounded) for the client's, then drop."""
        if self._gone:
            return
        if self._ws.state is _OPEN:
            self._ws.send_close(code, reason)
            self.flush()
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._waiter), timeout)
        if not self._gone:
            self._transport.abort()

    def heartbeat(self) -> None:
        """Called every sweep: ping a quiet client, drop one that ignored the last ping."""
        if self._heard:
            self._heard = self._pinged = False
            return
        if self._pinged:
            self._transport.abort()
        elif self.open:
            self._pinged = True
            self._ws.send_ping(b"")
            self.flush()
