"""One TCP client on a raw non-blocking socket, driven by loop readiness callbacks.

The relay owns the socket itself (no asyncio transport) so that a TCP<->TCP pair can hand
both sockets to the splice pump (splice.py), which asyncio's transports would not allow.
Until then, and for a pair with a WebSocket, this class reads, writes with a queue, and
closes gently: when the relay ends a connection, its queued bytes go first, then a FIN
(`shutdown`), then what the client still sends is read and dropped until its EOF, so a
close never turns into a reset that would discard bytes the client has not read yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque

from pigeonhole.transit.owner import Owner
from pigeonhole.transit.party import Party

READ_BYTES = 256 * 1024


class TcpEndpoint:
    """A client socket: reads go to the owner, writes are queued, close is gentle."""

    __slots__ = (
        "_close_timeout",
        "_closed",
        "_finishing",
        "_linger",
        "_loop",
        "_out",
        "_out_bytes",
        "_owner",
        "_reading",
        "_timer",
        "_writing",
        "fd",
        "party",
        "sock",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        owner: Owner,
        close_timeout: float,
    ) -> None:
        sock.setblocking(False)
        self._close_timeout = close_timeout
        self._loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self._owner = owner
        self.party: Party | None = None
        self._out: deque[memoryview] = deque()
        self._out_bytes = 0
        self._reading = self._writing = False
        #: finish() called: close after the queue; lingering: FIN sent, reading to EOF
        self._finishing = self._linger = self._closed = False
        self._timer: asyncio.TimerHandle | None = None

    # -- reading -------------------------------------------------------------------

    def resume_reading(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self._loop.add_reader(self.fd, self._on_readable)

    def pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self.fd)

    def _on_readable(self) -> None:
        try:
            data = self.sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if self._linger:  # closing: what the client still sends is dropped
            if not data:
                self.abort()
            return
        assert self.party is not None
        if data:
            self._owner.data(self.party, data)
        else:
            self.pause_reading()
            self._owner.eof(self.party)

    # -- writing -------------------------------------------------------------------

    def buffered(self) -> int:
        return self._out_bytes

    def write(self, data: bytes) -> None:
        if self._closed or self._linger or not data:
            return
        view = memoryview(data)
        if not self._out:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._lost()
                return
            view = view[sent:]
            if not view:
                return
        self._out.append(view)
        self._out_bytes += len(view)
        if not self._writing:
            self._writing = True
            self._loop.add_writer(self.fd, self._on_writable)

    def write_pieces(self, pieces: list[bytes], size: int) -> None:
        for piece in pieces:
            self.write(piece)

    def _on_writable(self) -> None:
        out = self._out
        while out:
            try:
                sent = self.sock.send(out[0])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._lost()
                return
            self._out_bytes -= sent
            if self._finishing:  # a slow reader that keeps reading is given its time
                self._restart_timer()
            if sent < len(out[0]):
                out[0] = out[0][sent:]
                return
            out.popleft()
        self._writing = False
        self._loop.remove_writer(self.fd)
        if self._finishing:
            self._shutdown()
        elif self.party is not None:
            self._owner.drained(self.party)

    def _lost(self) -> None:
        """The client reset the connection while we wrote: nothing more can reach it."""
        self._out.clear()
        self._out_bytes = 0
        if self._finishing or self.party is None:
            self.abort()
        else:
            self._owner.eof(self.party)

    # -- closing -------------------------------------------------------------------

    def finish(self) -> None:
        if self._finishing or self._closed:
            return
        self._finishing = True
        self._restart_timer()
        if not self._out:
            self._shutdown()

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(self._close_timeout, self.abort)

    def _shutdown(self) -> None:
        """FIN after every queued byte; then read (and drop) until the client's EOF."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        self._linger = True
        self.resume_reading()

    def abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.pause_reading()
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self.fd)
        if self._timer is not None:
            self._timer.cancel()
        self.sock.close()
        if self.party is not None:
            self._owner.gone(self.party)

    def detach(self) -> None:
        """Stop this class's own reading and writing: the splice pump drives the socket."""
        self.pause_reading()
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self.fd)
