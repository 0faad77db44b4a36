"""TCP<->TCP pairs: bytes move socket -> pipe -> socket in the kernel (`os.splice`).

How, and why on the event loop. When a pair's sending socket is readable, one
non-blocking `splice` moves what it holds (up to a pipe's size) into a pipe and a second
moves the pipe into the receiving socket; if the receiver's socket is full, reading stops
until it is writable and the pipe has emptied (back-pressure: the sender's kernel buffers
fill and its TCP window closes). The bytes never enter Python: a callback costs two
system calls whatever the size moved, so relay CPU is ~0.2 s per GB instead of ~0.6 s
for a copying asyncio relay.

The alternative, a worker thread per direction with blocking `splice`, releases the GIL
during each call but must take it back after every call: with many pairs those threads
contend with the event loop for the GIL, and a thread that wants it makes the loop hand
it over every switch interval (5 ms), exactly the latency a mailbox exchange on the same
loop would feel; threads also cost a stack each. Readiness callbacks instead run in the
loop's turn like any other I/O, each does a bounded amount of work (two system calls, no
byte copies), and a pair costs no thread. A relay under heavy load then shares the
loop's core fairly, callback by callback, with the mailbox's callbacks.

Pipes are lent, not owned. A pipe's size sets how much one callback moves, so it sets
the cost per GB (measured at 100 pairs: 1 MiB pipes cost ~2/3 of 512 KiB ones, 64 KiB
ones ~3x, 8 KiB ones ~10x). But pipe memory is limited per user: without CAP_SYS_RESOURCE (the
systemd unit's DynamicUser), once a user's pipes hold `fs.pipe-user-pages-soft` pages
(16384: 64 MiB) F_SETPIPE_SZ fails and every new pipe gets 2 pages (8 KiB), so two pipes
of the full size for each of 100 pairs cannot be had. A pipe holds bytes only between
the two splices of a move, though, and on one event loop only the flows whose receiver
is full keep bytes in theirs. So a flow borrows a pipe from its relay's `PipePool` when
it moves and gives it back as soon as it is empty: a relay whose receivers keep up
needs far fewer full-size pipes than two per pair, and only a flow held up by its
receiver keeps one (its buffer, at most `direction_buffer_bytes`). Pipes are made
at that size while the process's pipes stay within `PipePages` (7/8 of the user's
limit, read from /proc once, when the first relay of the process starts), smaller past
it; with no descriptor left for a pipe, a move copies one slice through Python instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import typing
from collections.abc import Callable
from pathlib import Path

from pigeonhole.transit.core import TransitCore
from pigeonhole.transit.party import Party, Step
from pigeonhole.transit.tcp import TcpEndpoint
from pigeonhole.transit.throttle import Throttle

FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
#: socket -> pipe -> socket rounds in one readiness callback, while each fills the pipe
MOVES_PER_CALL = 4


PAGE = os.sysconf("SC_PAGE_SIZE")
#: bytes one move copies through Python when no descriptor is left for a pipe
FIRST_PIPE_BYTES = 64 * 1024
#: empty pipes a relay keeps for the next moves (more are closed when given back): enough
#: that a busy relay does not close and remake pipes as the number lent moves (100 fast
#: pairs in the benchmark had up to 57 lent at once; keeping 8 remade ~370 in 5 s)
KEEP_FREE_PIPES = 64
#: capabilities: CAP_SYS_RESOURCE lifts the per-user pipe limit and pipe-max-size,
#: CAP_SYS_ADMIN the per-user limit only
CAP_SYS_RESOURCE = 1 << 24
CAP_SYS_ADMIN = 1 << 21


def _sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys/fs", name).read_text())
    except (OSError, ValueError):
        return None


def _capabilities() -> int:
    """This process's effective capabilities (0 when they cannot be read)."""
    try:
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(row.split()[1], 16) for row in status if row.startswith("CapEff:"))
    except (OSError, ValueError, StopIteration):
        return 0


def pipe_page_limit() -> int | None:
    """Pages this process's pipes may hold: 7/8 of the per-user soft limit (the rest for
    the user's other pipes); None when there is no limit or the process is exempt."""
    soft = _sysctl("pipe-user-pages-soft")
    if not soft or soft <= 0 or _capabilities() & (CAP_SYS_RESOURCE | CAP_SYS_ADMIN):
        return None
    return soft * 7 // 8


def pipe_size_limit() -> int | None:
    """The largest pipe this process may ask for (`fs.pipe-max-size`, 1 MiB by default;
    asking more fails and leaves the pipe as it was); None when exempt."""
    if _capabilities() & CAP_SYS_RESOURCE:
        return None
    return _sysctl("pipe-max-size")


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


@functools.cache
def pipe_pages() -> PipePages:
    """The process's one page account (the per-user limit is the whole process's), made
    when the first pipe pool is."""
    return PipePages(pipe_page_limit())


class Pipe:
    """A non-blocking pipe: its two ends, its capacity in bytes, the account it is in."""

    __slots__ = ("capacity", "pages", "r", "w")

    def __init__(self, r: int, w: int, capacity: int, pages: PipePages) -> None:
        self.r, self.w, self.capacity, self.pages = r, w, capacity, pages

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)
        self.pages.give_back(self.capacity // PAGE)


class PipePool:
    """The empty pipes of one relay, lent to a flow for a move and given back empty."""

    __slots__ = ("_free", "created", "keep", "pages", "size")

    def __init__(self, size: int, keep: int = KEEP_FREE_PIPES) -> None:
        #: the size pipes are made at (a direction's buffer bound, within what the system
        #: lets this process ask for), pages permitting
        limit = pipe_size_limit()
        self.size = size if limit is None else min(size, limit)
        self.pages = pipe_pages()
        self.keep = keep
        self._free: list[Pipe] = []
        #: pipes made so far (each lent again and again)
        self.created = 0

    def borrow(self) -> Pipe:
        """An empty pipe; OSError when no descriptor is left for a new one."""
        if self._free:
            return self._free.pop()
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.created += 1
        capacity = fcntl.fcntl(w, F_GETPIPE_SZ)
        pages = self.pages
        pages.take(capacity // PAGE, needed=True)
        want = self.size
        if want > capacity:  # as large as the page account allows
            while want > capacity and not pages.take((want - capacity) // PAGE):
                want //= 2
            want = max(want, capacity)
        if want != capacity:
            with contextlib.suppress(OSError):  # refused: the pipe keeps its size
                fcntl.fcntl(w, F_SETPIPE_SZ, want)
            got = fcntl.fcntl(w, F_GETPIPE_SZ)
            pages.give_back((max(want, capacity) - got) // PAGE)
            capacity = got
        return Pipe(r, w, capacity, pages)

    def give_back(self, pipe: Pipe) -> None:
        """Take back an empty pipe (kept for the next move, or closed)."""
        if len(self._free) < self.keep:
            self._free.append(pipe)
        else:
            pipe.close()

    def close(self) -> None:
        for pipe in self._free:
            pipe.close()
        self._free.clear()


class Flow:
    """One direction of a pair: `src`'s bytes through a lent pipe out to `dst`."""

    __slots__ = (
        "_copied",
        "_greeting",
        "_in_pipe",
        "_loop",
        "_pipe",
        "_pool",
        "_pump",
        "_reading",
        "_writing",
        "dst",
        "eof",
        "src",
    )

    def __init__(
        self, pump: SplicePump, src: TcpEndpoint, dst: TcpEndpoint, greeting: bytes
    ) -> None:
        self._pump = pump
        self._loop = pump.loop
        self._pool = pump.pipes
        self.src, self.dst = src, dst
        #: the pipe lent for the move under way (None between moves)
        self._pipe: Pipe | None = None
        self._in_pipe = 0
        #: what the relay says first to `dst` (`ok\n`, then what `src` sent with its
        #: line), not all sent yet
        self._greeting = memoryview(greeting) if greeting else None
        #: a slice of `src`'s bytes read through Python (no pipe could be had), not all
        #: sent yet
        self._copied: memoryview | None = None
        self._reading = self._writing = False
        self.eof = False

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
        moves several pipes' worth per wakeup), at most MOVES_PER_CALL times (fairness);
        the pipe goes back to the pool whenever it is empty."""
        party = self.src.party
        assert party is not None
        bucket = party.bucket
        pump = self._pump
        try:
            for _ in range(MOVES_PER_CALL):
                pipe = self._pipe
                if pipe is None:
                    with contextlib.suppress(OSError):  # no descriptor: copy this slice
                        pipe = self._pipe = self._pool.borrow()
                room = pipe.capacity if pipe is not None else FIRST_PIPE_BYTES
                if bucket is not None:
                    room = pump.throttle.room(bucket, room, self._read_on)
                    if not room:  # read again once the bucket lets bytes go
                        self._read_off()
                        return
                try:
                    if pipe is not None:
                        moved = os.splice(self.src.fd, pipe.w, room, flags=FLAGS)
                        self._in_pipe += moved
                    else:
                        data = self.src.sock.recv(room)
                        moved = len(data)
                        self._copied = memoryview(data) if data else None
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    moved = 0  # a reset: as EOF, what is in the pipe still goes
                if not moved:
                    self.eof = True
                    self._read_off()
                    pump.source_ended(self)
                    self._drain()
                    return
                if bucket is not None:
                    bucket.spend(moved)
                step = pump.relayed(party, moved)
                if step is not None:
                    pump.run(step)
                    return
                if not self._drain():
                    self._read_off()  # resumed once the pipe has emptied into `dst`
                    return
                if moved < room:  # the socket is (very likely) empty: wait for more
                    return
        finally:
            self._return_pipe()

    def _return_pipe(self) -> None:
        """Give an empty lent pipe back to the pool."""
        pipe = self._pipe
        if pipe is not None and not self._in_pipe:
            self._pipe = None
            self._pool.give_back(pipe)

    def _on_writable(self) -> None:
        if self._drain():
            self._return_pipe()
            self._read_on()

    def _drain(self) -> bool:
        """Move the greeting, a copied slice and the pipe into `dst`; True once all of
        it has gone."""
        try:
            if self._greeting is not None:
                self._greeting = self._send(self._greeting)
                if self._greeting is not None:
                    return False
            if self._copied is not None:
                self._copied = self._send(self._copied)
                if self._copied is not None:
                    return False
            pipe = self._pipe
            while self._in_pipe:
                assert pipe is not None
                self._in_pipe -= os.splice(pipe.r, self.dst.fd, self._in_pipe, flags=FLAGS)
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

    def _send(self, data: memoryview) -> memoryview | None:
        """Send what `dst` takes now; the rest (None: nothing left). BlockingIOError and
        OSError go to `_drain`."""
        sent = self.dst.sock.send(data)
        if sent == len(data):
            return None
        self._write_on()
        return data[sent:]

    @property
    def held(self) -> int:
        """Bytes in the pipe, the greeting or a copied slice, not yet given to `dst`."""
        held = self._in_pipe
        for view in (self._greeting, self._copied):
            if view is not None:
                held += len(view)
        return held

    def stop(self) -> None:
        """No more moves (the pair ended, or this direction's bytes no longer matter);
        a throttled flow's wake-up finds it ended."""
        self._read_off()
        self._write_off()
        self.eof = True

    def close(self) -> None:
        """Stop; an empty pipe goes back to the pool, one with bytes still in it closes."""
        self.stop()
        pipe = self._pipe
        if pipe is not None:
            self._pipe = None
            if self._in_pipe:
                self._in_pipe = 0
                pipe.close()
            else:
                self._pool.give_back(pipe)


class SplicePump:
    """Both directions of one TCP<->TCP pair; ends the pair when a side has ended."""

    __slots__ = ("_hub", "flows", "loop", "pipes", "throttle")

    def __init__(
        self, hub: PumpHub, a: TcpEndpoint, b: TcpEndpoint, greetings: tuple[bytes, bytes]
    ) -> None:
        self._hub = hub
        self.loop = hub.loop
        self.pipes = hub.pipes
        self.throttle = hub.throttle
        self.flows = (Flow(self, a, b, greetings[0]), Flow(self, b, a, greetings[1]))
        a.detach()
        b.detach()

    def start(self) -> None:
        for flow in self.flows:
            flow.start()

    def relayed(self, party: Party, size: int) -> Step | None:
        """Counted by the core (a Step if a cap ends the pair)."""
        return self._hub.core.relayed(party, size, self._hub.clock())

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
    clock: Callable[[], float]
    core: TransitCore
    pipes: PipePool
    throttle: Throttle

    def run(self, step: Step) -> None: ...

    def pair_ended(self, party: Party) -> None: ...
