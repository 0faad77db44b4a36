"""The relay's I/O glue: runs the core's steps on real connections and joins pairs.

A pair of two TCP sockets is joined by a splice pump (splice.py: bytes stay in the
kernel). A pair with a WebSocket side moves bytes through Python: each read from one side
is written to the other, and when more than `direction_buffer_bytes` wait for the
receiver the sender is paused until they have gone (back-pressure). Every
`sweep_interval` the timeouts are checked.
"""

from __future__ import annotations

import asyncio
import time

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.core import OK, TransitCore
from pigeonhole.transit.endpoint import Endpoint
from pigeonhole.transit.party import Party, Phase, Step
from pigeonhole.transit.splice import SplicePump
from pigeonhole.transit.tcp import TcpEndpoint
from pigeonhole.transit.usage import UsageSink


class Hub:
    """One relay's core and live connections (TCP and WebSocket share it)."""

    def __init__(self, config: TransitConfig, usage: UsageSink, splice: bool = True) -> None:
        self.loop = asyncio.get_running_loop()
        self.config = config
        self.core = TransitCore(config, usage, time.time())
        self.splice = splice
        self._pumps: dict[Party, SplicePump] = {}
        self.live: set[Party] = set()
        self._sweeper = self.loop.call_later(config.sweep_interval, self._sweep)

    # -- connections ---------------------------------------------------------------

    def open(self, endpoint: Endpoint, address: str) -> Party | str:
        """The new connection's party, or the refusal kind (the caller closes it)."""
        party = self.core.open(address, endpoint, time.time())
        if isinstance(party, Party):
            self.live.add(party)
        return party

    def data(self, party: Party, data: bytes) -> None:
        if party.phase is Phase.PAIRED:
            self._forward(party, data)
        else:
            self.run(self.core.receive(party, data, time.time()))

    def eof(self, party: Party) -> None:
        self.run(self.core.lost(party, time.time()))

    def refused(self, party: Party, kind: str) -> None:
        self.core.refusals.note(kind, time.time())

    def gone(self, party: Party) -> None:
        if party in self.live:
            self.live.discard(party)
            self.run(self.core.forget(party, time.time()))

    def drained(self, party: Party) -> None:
        """`party`'s queue has gone: its partner, paused for it, may send again."""
        partner = party.partner
        if partner is not None and partner.phase is Phase.PAIRED:
            partner.endpoint.resume_reading()

    def pair_ended(self, party: Party) -> None:
        self.run(self.core.lost(party, time.time()))

    # -- bytes through Python (a pair with a WebSocket side) -----------------------

    def _forward(self, party: Party, data: bytes) -> None:
        partner = party.partner
        assert partner is not None
        partner.endpoint.write(data)
        step = self.core.relayed(party, len(data), time.time())
        if step is not None:
            self.run(step)
            return
        if partner.endpoint.buffered() > self.config.direction_buffer_bytes:
            party.endpoint.pause_reading()  # resumed by `drained(partner)`
        bucket = party.bucket
        if bucket is not None:
            now = time.time()
            bucket.spend(len(data))
            if bucket.allowance(now) <= 0:
                party.endpoint.pause_reading()
                self.loop.call_later(bucket.delay(now), self._unthrottle, party)

    def _unthrottle(self, party: Party) -> None:
        partner = party.partner
        if party.phase is not Phase.PAIRED or partner is None:
            return
        if partner.endpoint.buffered() <= self.config.direction_buffer_bytes:
            party.endpoint.resume_reading()

    # -- carrying out the core's decisions ------------------------------------------

    def run(self, step: Step) -> None:
        for party, line in step.closes:
            pump = self._pumps.pop(party, None)
            if pump is not None:
                pump.close()
            if line:
                party.endpoint.write(line)
            party.endpoint.finish()
        if step.paired is not None:
            self._join(step.paired, step.payload)

    def _join(self, newcomer: Party, payload: bytes) -> None:
        waiter = newcomer.partner
        assert waiter is not None
        a, b = waiter.endpoint, newcomer.endpoint
        if self.splice and isinstance(a, TcpEndpoint) and isinstance(b, TcpEndpoint):
            try:
                pump = SplicePump(self, a, b, (OK, OK + payload))
            except OSError:  # no descriptors for its pipes: this pair goes through Python
                pass
            else:
                self._pumps[waiter] = self._pumps[newcomer] = pump
                pump.start()
                return
        a.write(OK + payload)
        b.write(OK)
        if a.buffered() > self.config.direction_buffer_bytes:
            b.pause_reading()

    def held_bytes(self) -> int:
        """Bytes the relay holds for clients now: queues, socket write buffers, pipes."""
        queued = sum(party.endpoint.buffered() for party in self.live)
        return queued + sum(pump.held for pump in set(self._pumps.values()))

    # -- time ----------------------------------------------------------------------

    def _sweep(self) -> None:
        now = time.time()
        self.run(self.core.expire(now))
        refusals = self.core.refusals
        refusals.note_time(now)
        self._sweeper = self.loop.call_later(self.config.sweep_interval, self._sweep)

    def close(self) -> None:
        """Drop every connection now (the end of a drain) and stop the sweeps."""
        self._sweeper.cancel()
        for pump in set(self._pumps.values()):
            pump.close()
        self._pumps.clear()
        for party in list(self.live):
            party.endpoint.abort()
