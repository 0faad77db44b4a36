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

The pipes are lent by the relay's `PipePool` (pipes.py), each for one move at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import typing
from collections.abc import Callable

from pigeonhole.transit.core import TransitCore
from pigeonhole.transit.party import Party, Step
from pigeonhole.transit.pipes import Pipe, PipePool
from pigeonhole.transit.tcp import TcpEndpoint
from pigeonhole.transit.throttle import Throttle

FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
#: socket -> pipe -> socket rounds in one readiness callback, while each fills the pipe
MOVES_PER_CALL = 4
#: bytes one move copies through Python when no descriptor is left for a pipe
FIRST_PIPE_BYTES = 64 * 1024


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

    __slots__ = ("_hub", "flows", "loop", "pipes")

    def __init__(
        self, hub: PumpHub, a: TcpEndpoint, b: TcpEndpoint, greetings: tuple[bytes, bytes]
    ) -> None:
        self._hub = hub
        self.loop = hub.loop
        self.pipes = hub.pipes
        self.flows = (Flow(self, a, b, greetings[0]), Flow(self, b, a, greetings[1]))
        a.detach()
        b.detach()

    def start(self) -> None:
        for flow in self.flows:
            flow.start()

    @property
    def throttle(self) -> Throttle:
        """The relay's rate cap (asked only by a flow whose sender has a bucket)."""
        return self._hub.throttle

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
