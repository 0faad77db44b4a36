"""TCP<->TCP pairs: bytes move socket -> pipe -> socket in the kernel (`os.splice`).

How, and why on the event loop. Each direction of a pair has a pipe. When the sending
socket is readable, one non-blocking `splice` moves what it holds (up to the pipe's size)
into the pipe and a second moves the pipe into the receiving socket; if the receiver's
socket is full, reading stops until it is writable and the pipe has emptied
(back-pressure: the sender's kernel buffers fill and its TCP window closes). The bytes
never enter Python: a callback costs two system calls whatever the size moved, so relay
CPU is ~0.2 s per GB instead of ~0.6 s for a copying asyncio relay.

The alternative, a worker thread per direction with blocking `splice`, releases the GIL
during each call but must take it back after every call: with many pairs those threads
contend with the event loop for the GIL, and a thread that wants it makes the loop hand
it over every switch interval (5 ms), exactly the latency a mailbox exchange on the same
loop would feel; threads also cost a stack each. Readiness callbacks instead run in the
loop's turn like any other I/O, each does a bounded amount of work (two system calls, no
byte copies), and a pair costs two pipes and no thread. A relay under heavy load then
shares the loop's core fairly, callback by callback, with the mailbox's callbacks.

The pipe is the only buffer the server holds for a direction: at most
`direction_buffer_bytes`. Its size sets how much one callback moves, so it sets the cost
per GB (measured, 100 pairs: ~0.25 s/GB with 512 KiB pipes, ~0.8 with 64 KiB, ~2.7 with
8 KiB). But pipe memory is limited per user: without CAP_SYS_RESOURCE (the systemd unit's
DynamicUser), once a user's pipes hold `fs.pipe-user-pages-soft` pages (16384: 64 MiB)
F_SETPIPE_SZ fails and every new pipe gets 2 pages (8 KiB). So a pipe starts at the
system's default size (or the bound, if smaller) and doubles, up to the bound, each time
one move fills at least half of it or `dst` cannot take all it holds (a fast flow, or a
receiver slower than its sender: bigger moves then), while the pipes of this process stay
within `PipePages`, 7/8 of that limit: fast flows get big pipes, slow ones
keep small ones, and new pipes keep their default size. With many fast pairs at once an
operator raises `fs.pipe-user-pages-soft` (docs/transit.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
import typing
from pathlib import Path

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.core import TransitCore
from pigeonhole.transit.party import Party, Step
from pigeonhole.transit.tcp import TcpEndpoint

FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
#: socket -> pipe -> socket rounds in one readiness callback, while each fills the pipe
MOVES_PER_CALL = 4


PAGE = os.sysconf("SC_PAGE_SIZE")
#: the size of a new pipe (the kernel's default), before it grows
FIRST_PIPE_BYTES = 64 * 1024
#: the capabilities that lift the per-user pipe limit (CAP_SYS_ADMIN, CAP_SYS_RESOURCE)
UNLIMITED_CAPS = (1 << 21) | (1 << 24)


def pipe_page_limit() -> int | None:
    """Pages this process's pipes may hold: 7/8 of the per-user soft limit (the rest for
    the user's other pipes); None when there is no limit or the process is exempt."""
    try:
        soft = int(Path("/proc/sys/fs/pipe-user-pages-soft").read_text())
        caps = next(
            int(row.split()[1], 16)
            for row in Path("/proc/self/status").read_text().splitlines()
            if row.startswith("CapEff:")
        )
    except (OSError, ValueError, StopIteration):
        return None
    if soft <= 0 or caps & UNLIMITED_CAPS:
        return None
    return soft * 7 // 8


class PipePages:
    """The pages every pump pipe of this process holds, within a limit (None: none)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def take(self, pages: int, needed: bool = False) -> bool:
        """Count `pages` more; unless `needed` (a pipe the kernel already sized), only
        within the limit. False: not granted."""
        if not needed and self.limit is not None and self.used + pages > self.limit:
            return False
        self.used += pages
        return True

    def give_back(self, pages: int) -> None:
        self.used -= pages


PIPE_PAGES = PipePages(pipe_page_limit())


def make_pipe(size: int) -> tuple[int, int, int]:
    """A non-blocking pipe of about `size` bytes: (read end, write end, its capacity)."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(w, F_SETPIPE_SZ, size)
    return r, w, fcntl.fcntl(w, F_GETPIPE_SZ)


class Flow:
    """One direction of a pair: `src`'s bytes into the pipe and out to `dst`."""

    __slots__ = (
        "_bound",
        "_capacity",
        "_head",
        "_in_pipe",
        "_loop",
        "_pump",
        "_r",
        "_reading",
        "_timer",
        "_w",
        "_writing",
        "dst",
        "eof",
        "src",
    )

    def __init__(self, pump: SplicePump, src: TcpEndpoint, dst: TcpEndpoint, head: bytes) -> None:
        self._pump = pump
        self._loop = pump.loop
        self.src, self.dst = src, dst
        self._bound = pump.pipe_bytes
        self._r, self._w, self._capacity = make_pipe(min(self._bound, FIRST_PIPE_BYTES))
        PIPE_PAGES.take(self._capacity // PAGE, needed=True)
        self._in_pipe = 0
        #: bytes the relay says first to `dst` (`ok\n`, then what `src` sent with its line)
        self._head = memoryview(head) if head else None
        self._reading = self._writing = False
        self.eof = False
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._drain():
            self._read_on()

    def _read_on(self) -> None:
        if not self._reading and not self.eof:
            self._reading = True
            self._loop.add_reader(self.src.fd, self._on_readable)

    def _read_off(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self.src.fd)

    def _write_on(self) -> None:
        if not self._writing:
            self._writing = True
            self._loop.add_writer(self.dst.fd, self._on_writable)

    def _write_off(self) -> None:
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self.dst.fd)

    def _on_readable(self) -> None:
        """Socket -> pipe -> socket, again while the pipe filled and emptied (a fast pair
        moves several pipes' worth per wakeup), at most MOVES_PER_CALL times (fairness)."""
        party = self.src.party
        assert party is not None
        bucket = party.bucket
        for _ in range(MOVES_PER_CALL):
            room = self._capacity
            if bucket is not None:
                now = time.time()  # the core's clock, which made the bucket
                room = min(room, bucket.allowance(now))
                if room <= 0:
                    self._read_off()
                    self._timer = self._loop.call_later(bucket.delay(now), self._read_on)
                    return
            try:
                moved = os.splice(self.src.fd, self._w, room, flags=FLAGS)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                moved = 0  # a reset: as EOF, what is in the pipe still goes
            if not moved:
                self.eof = True
                self._read_off()
                self._pump.source_ended(self)
                self._drain()
                return
            self._in_pipe += moved
            if 2 * moved >= self._capacity and self._capacity < self._bound:
                self._grow()
            if bucket is not None:
                bucket.spend(moved)
            step = self._pump.core_relayed(party, moved)
            if step is not None:
                self._pump.run(step)
                return
            if not self._drain():
                self._read_off()  # resumed once the pipe has emptied into `dst`
                if self._capacity < self._bound:
                    self._grow()  # the next round after `dst` drained moves more
                return
            if moved < room:  # the socket is (very likely) empty: wait for more
                return

    def _grow(self) -> None:
        """Double the pipe (a fast flow), within the bound and PIPE_PAGES."""
        old = self._capacity
        new = min(self._bound, 2 * old)
        if not PIPE_PAGES.take((new - old) // PAGE):
            return
        try:
            fcntl.fcntl(self._w, F_SETPIPE_SZ, new)
            self._capacity = fcntl.fcntl(self._w, F_GETPIPE_SZ)
        except OSError:  # refused (the user's limit): this pipe keeps its size
            self._bound = old
        PIPE_PAGES.give_back((new - self._capacity) // PAGE)

    def _on_writable(self) -> None:
        if self._drain():
            self._read_on()

    def _drain(self) -> bool:
        """Move the pipe (and the head) into `dst`; True once all of it has gone."""
        try:
            if self._head is not None:
                sent = self.dst.sock.send(self._head)
                self._head = self._head[sent:] if sent < len(self._head) else None
                if self._head is not None:
                    self._write_on()
                    return False
            while self._in_pipe:
                self._in_pipe -= os.splice(self._r, self.dst.fd, self._in_pipe, flags=FLAGS)
        except (BlockingIOError, InterruptedError):
            self._write_on()
            return False
        except OSError:
            self.stop()
            self._pump.sink_lost(self)
            return False
        self._write_off()
        if self.eof:
            self._pump.flow_done(self)
        return True

    @property
    def held(self) -> int:
        """Bytes in the pipe or the head, not yet given to `dst`."""
        return self._in_pipe + (len(self._head) if self._head is not None else 0)

    def stop(self) -> None:
        """No more moves (the pair ended, or this direction's bytes no longer matter)."""
        self._read_off()
        self._write_off()
        self.eof = True
        if self._timer is not None:
            self._timer.cancel()

    def close(self) -> None:
        self.stop()
        if self._r >= 0:
            os.close(self._r)
            os.close(self._w)
            self._r = self._w = -1
            PIPE_PAGES.give_back(self._capacity // PAGE)


class SplicePump:
    """Both directions of one TCP<->TCP pair; ends the pair when a side has ended."""

    __slots__ = ("_hub", "flows", "loop", "pipe_bytes")

    def __init__(self, hub: PumpHub, a: TcpEndpoint, b: TcpEndpoint, heads: tuple[bytes, bytes]):
        self._hub = hub
        self.loop = hub.loop
        self.pipe_bytes = hub.config.direction_buffer_bytes
        forward = Flow(self, a, b, heads[0])  # OSError (out of descriptors): no pump
        try:
            self.flows = (forward, Flow(self, b, a, heads[1]))
        except OSError:
            forward.close()
            raise
        a.detach()
        b.detach()

    def start(self) -> None:
        for flow in self.flows:
            flow.start()

    def core_relayed(self, party: Party, size: int) -> Step | None:
        return self._hub.core.relayed(party, size, time.time())

    def run(self, step: Step) -> None:
        self._hub.run(step)

    def source_ended(self, flow: Flow) -> None:
        """No half-close: the other direction stops; this one empties its pipe first."""
        for other in self.flows:
            if other is not flow:
                other.stop()

    def flow_done(self, flow: Flow) -> None:
        """Every byte the ended side sent has reached its partner: the pair is over."""
        party = flow.src.party
        assert party is not None
        self._hub.pair_ended(party)

    def sink_lost(self, flow: Flow) -> None:
        """`dst` cannot take bytes any more (reset): it has ended."""
        party = flow.dst.party
        assert party is not None
        self._hub.pair_ended(party)

    @property
    def held(self) -> int:
        return sum(flow.held for flow in self.flows)

    def close(self) -> None:
        for flow in self.flows:
            flow.close()


class PumpHub(typing.Protocol):
    """What a pump needs of the relay (hub.py's Hub)."""

    loop: asyncio.AbstractEventLoop
    config: TransitConfig
    core: TransitCore

    def run(self, step: Step) -> None: ...

    def pair_ended(self, party: Party) -> None: ...
