"""The relay's I/O glue: runs the core's steps on real connections and joins pairs.

A pair of two TCP sockets is joined by a splice pump (splice.py: bytes stay in the
kernel). A pair with a WebSocket side moves bytes through Python: each read from one side
is written to the other, and when more than `direction_buffer_bytes` wait for the
receiver the sender is paused until they have gone (back-pressure). Every
`sweep_interval` the timeouts are checked. Time is the relay's clock (passed in, as the
mailbox's is), so a test moves it and asks for a check. Pairs across relays are
dialing.py's; the rate cap is throttle.py's.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from functools import partial

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.core import OK, TransitCore
from pigeonhole.transit.dialing import Dialer
from pigeonhole.transit.endpoint import Endpoint
from pigeonhole.transit.party import Party, Phase, Step
from pigeonhole.transit.peers import Directory
from pigeonhole.transit.pipes import PipePool
from pigeonhole.transit.splice import SplicePump
from pigeonhole.transit.tcp import TcpEndpoint
from pigeonhole.transit.throttle import Throttle
from pigeonhole.transit.usage import UsageSink


class Hub:
    """One relay's core and live connections (TCP and WebSocket share it)."""

    def __init__(
        self,
        config: TransitConfig,
        usage: UsageSink,
        clock: Callable[[], float],
        splice: bool = True,
        directory: Directory | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.clock = clock
        self.config = config
        self.core = TransitCore(config, usage, clock())
        self.splice = splice
        self.dialer = Dialer(self, directory)
        self.throttle = Throttle(self.loop, clock)
        self._pumps: dict[Party, SplicePump] = {}
        #: the pipes splice pumps borrow for their moves
        self.pipes = PipePool(config.direction_buffer_bytes)
        self.live: set[Party] = set()
        #: the conditions `settled` waits for, with their futures (checked as steps run)
        self._awaited: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._sweeper = self.loop.call_later(config.sweep_interval, self._sweep)

    # -- connections ---------------------------------------------------------------

    def open(self, endpoint: Endpoint, address: str) -> Party | str:
        """The new connection's party, or the refusal kind (the caller closes it)."""
        party = self.core.open(address, endpoint, self.clock())
        if isinstance(party, Party):
            self.live.add(party)
            if self._awaited:
                self._check_awaited()
        return party

    def data(self, party: Party, data: bytes) -> None:
        if party.phase is Phase.PAIRED:
            self._forward(party, data)
        else:
            was = party.phase
            self.run(self.core.receive(party, data, self.clock()))
            if was is Phase.HANDSHAKE and party.phase is Phase.WAITING:
                self.dialer.waiting(party)

    def eof(self, party: Party) -> None:
        self.run(self.core.lost(party, self.clock()))

    def refused(self, party: Party, kind: str) -> None:
        self.core.refusals.note(kind, self.clock())

    def gone(self, party: Party) -> None:
        if party in self.live:
            self.live.discard(party)
            self.run(self.core.forget(party, self.clock()))

    def drained(self, party: Party) -> None:
        """`party`'s queue has gone: its partner, paused for it, may send again."""
        partner = party.partner
        if partner is not None and partner.phase is Phase.PAIRED:
            partner.endpoint.resume_reading()

    def pair_ended(self, party: Party) -> None:
        self.run(self.core.lost(party, self.clock()))

    # -- bytes through Python (a pair with a WebSocket side) -----------------------

    def pieces(self, party: Party, pieces: list[bytes]) -> None:
        if party.phase is Phase.PAIRED:
            partner = party.partner
            assert partner is not None
            size = sum(map(len, pieces))
            partner.endpoint.write_pieces(pieces, size)
            self._relayed(party, partner, size)
        else:  # the handshake (and perhaps the first bytes after it), piece by piece
            for piece in pieces:
                self.data(party, piece)

    def _forward(self, party: Party, data: bytes) -> None:
        partner = party.partner
        assert partner is not None
        partner.endpoint.write(data)
        self._relayed(party, partner, len(data))

    def _relayed(self, party: Party, partner: Party, size: int) -> None:
        """`size` bytes of `party` went to `partner`'s queue: counted, capped, bounded."""
        step = self.core.relayed(party, size, self.clock())
        if step is not None:
            self.run(step)
            return
        if partner.endpoint.buffered() > self.config.direction_buffer_bytes:
            party.endpoint.pause_reading()  # resumed by `drained(partner)`
        bucket = party.bucket
        if bucket is not None:
            bucket.spend(size)
            if not self.throttle.room(bucket, 1, partial(self._unthrottle, party)):
                party.endpoint.pause_reading()

    def _unthrottle(self, party: Party) -> None:
        partner = party.partner
        if party.phase is not Phase.PAIRED or partner is None:
            return
        if partner.endpoint.buffered() <= self.config.direction_buffer_bytes:
            party.endpoint.resume_reading()

    # -- carrying out the core's decisions ------------------------------------------

    def run(self, step: Step) -> None:
        self.dialer.ran(step)
        for party, line in step.closes:
            pump = self._pumps.pop(party, None)
            if pump is not None:
                pump.close()
            if line:
                party.endpoint.write(line)
            party.endpoint.finish()
        if step.paired is not None:
            self._join(step.paired, step.payload, step.greet)
        if self._awaited:
            self._check_awaited()

    def _join(self, newcomer: Party, payload: bytes, greet: bool = True) -> None:
        waiter = newcomer.partner
        assert waiter is not None
        a, b = waiter.endpoint, newcomer.endpoint
        if self.splice and isinstance(a, TcpEndpoint) and isinstance(b, TcpEndpoint):
            greetings = (OK, OK + payload) if greet else (b"", b"")
            pump = SplicePump(self, a, b, greetings)
            self._pumps[waiter] = self._pumps[newcomer] = pump
            pump.start()
            return
        if greet:
            a.write(OK + payload)
            b.write(OK)
        if a.buffered() > self.config.direction_buffer_bytes:
            b.pause_reading()

    def forward(self, party: Party, sock: socket.socket) -> None:
        """`sock` reaches the relay where waiting `party`'s partner is (dialing.py, the
        handshake sent on it): joined to `party` like a pair, bytes moved as any pair's."""
        if party.phase is not Phase.WAITING or self.core.draining:
            sock.close()  # gone meanwhile: the partner there sees a lonely client go
            return
        endpoint = TcpEndpoint(self.loop, sock, self, self.config.close_timeout)
        step, peer = self.core.forward(party, endpoint, self.clock())
        endpoint.party = peer
        self.live.add(peer)
        endpoint.resume_reading()
        self.run(step)

    def held_bytes(self) -> int:
        """Bytes the relay holds for clients now: queues, socket write buffers, pipes."""
        queued = sum(party.endpoint.buffered() for party in self.live)
        return queued + sum(pump.held for pump in set(self._pumps.values()))

    # -- time and the end ------------------------------------------------------------

    def _sweep(self) -> None:
        self.check_timeouts()
        self._sweeper = self.loop.call_later(self.config.sweep_interval, self._sweep)

    def check_timeouts(self) -> None:
        """Close the connections past a timeout at the clock's time now."""
        now = self.clock()
        self.run(self.core.expire(now))
        self.core.refusals.note_time(now)

    async def settled(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait until `condition()` holds (checked whenever a step has run or a connection
        has gone), at most `timeout` seconds; whether it holds."""
        if condition():
            return True
        awaited = (condition, self.loop.create_future())
        self._awaited.append(awaited)
        try:
            async with asyncio.timeout(timeout):
                await awaited[1]
        except TimeoutError:
            pass
        finally:
            self._awaited.remove(awaited)
        return condition()

    def _check_awaited(self) -> None:
        for condition, future in self._awaited:
            if not future.done() and condition():
                future.set_result(None)

    def close(self) -> None:
        """Drop every connection now (the end of a drain) and stop the sweeps."""
        self._sweeper.cancel()
        self.dialer.close()
        for pump in set(self._pumps.values()):
            pump.close()
        self._pumps.clear()
        self.pipes.close()
        for party in list(self.live):
            party.endpoint.abort()
