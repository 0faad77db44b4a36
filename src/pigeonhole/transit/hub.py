"""The relay's I/O glue: runs the core's steps on real connections and joins pairs.

A pair of two TCP sockets is joined by a splice pump (splice.py: bytes stay in the
kernel). A pair with a WebSocket side moves bytes through Python: each read from one side
is written to the other, and when more than `direction_buffer_bytes` wait for the
receiver the sender is paused until they have gone (back-pressure). Every
`sweep_interval` the timeouts are checked.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Coroutine
from typing import Any

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.core import OK, TransitCore
from pigeonhole.transit.endpoint import Endpoint
from pigeonhole.transit.party import Party, Phase, Step
from pigeonhole.transit.peers import Directory, Found, handshake_line, new_ticket
from pigeonhole.transit.splice import PipePool, SplicePump
from pigeonhole.transit.tcp import TcpEndpoint
from pigeonhole.transit.usage import UsageSink

log = logging.getLogger("pigeonhole.transit")


class Hub:
    """One relay's core and live connections (TCP and WebSocket share it)."""

    def __init__(
        self,
        config: TransitConfig,
        usage: UsageSink,
        splice: bool = True,
        directory: Directory | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.directory = directory
        #: waiting parties recorded in the directory (removed when they pair or go)
        self._recorded: set[Party] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.config = config
        self.core = TransitCore(config, usage, time.time())
        self.splice = splice
        self._pumps: dict[Party, SplicePump] = {}
        #: the pipes splice pumps borrow for their moves
        self.pipes = PipePool(config.direction_buffer_bytes)
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
            was = party.phase
            self.run(self.core.receive(party, data, time.time()))
            if was is Phase.HANDSHAKE and party.phase is Phase.WAITING and self.directory:
                self._spawn(self._meet(party, self.directory))

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
        step = self.core.relayed(party, size, time.time())
        if step is not None:
            self.run(step)
            return
        if partner.endpoint.buffered() > self.config.direction_buffer_bytes:
            party.endpoint.pause_reading()  # resumed by `drained(partner)`
        bucket = party.bucket
        if bucket is not None:
            now = time.time()
            bucket.spend(size)
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
        if self._recorded:
            self._unrecord([party for party, _ in step.closes])
            if step.paired is not None:
                self._unrecord([step.paired.partner])
        for party, line in step.closes:
            pump = self._pumps.pop(party, None)
            if pump is not None:
                pump.close()
            if line:
                party.endpoint.write(line)
            party.endpoint.finish()
        if step.paired is not None:
            self._join(step.paired, step.payload, step.greet)

    def _join(self, newcomer: Party, payload: bytes, greet: bool = True) -> None:
        waiter = newcomer.partner
        assert waiter is not None
        a, b = waiter.endpoint, newcomer.endpoint
        if self.splice and isinstance(a, TcpEndpoint) and isinstance(b, TcpEndpoint):
            heads = (OK, OK + payload) if greet else (b"", b"")
            pump = SplicePump(self, a, b, heads)
            self._pumps[waiter] = self._pumps[newcomer] = pump
            pump.start()
            return
        if greet:
            a.write(OK + payload)
            b.write(OK)
        if a.buffered() > self.config.direction_buffer_bytes:
            b.pause_reading()

    def held_bytes(self) -> int:
        """Bytes the relay holds for clients now: queues, socket write buffers, pipes."""
        queued = sum(party.endpoint.buffered() for party in self.live)
        return queued + sum(pump.held for pump in set(self._pumps.values()))

    # -- pairs across relays (peers.py) ----------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _unrecord(self, parties: list[Party | None]) -> None:
        directory = self.directory
        for party in parties:
            if party in self._recorded and directory is not None:
                assert party is not None and party.token is not None
                self._recorded.discard(party)
                self._spawn(self._left(directory, party.token, party.side))

    async def _left(self, directory: Directory, token: str, side: str | None) -> None:
        try:
            await directory.left(token, side)
        except Exception:  # a stale row only makes a later side try a dead address
            log.exception("transit: could not remove a waiting record")

    async def _meet(self, party: Party, directory: Directory, tries: int = 3) -> None:
        """Record `party` as waiting here, or join it to its partner's relay (a relay that
        does not answer loses its records, and the directory is asked again)."""
        assert party.token is not None
        token, side = party.token, party.side
        party.ticket = new_ticket()
        try:
            found = await directory.meet(token, side, party.ticket)
        except Exception:  # it still pairs with a partner that reaches this relay
            log.exception("transit: the pairing directory failed")
            return
        if found is None and party.phase is Phase.WAITING:
            self._recorded.add(party)
        elif found is None:  # paired here or gone while it was recorded
            await self._left(directory, token, side)
        elif party.phase is Phase.WAITING and not await self._join_peer(party, found):
            try:
                await directory.gone(found.address)
            except Exception:
                log.exception("transit: the pairing directory failed")
                return
            if tries > 1 and party.phase is Phase.WAITING:
                await self._meet(party, directory, tries - 1)

    async def _join_peer(self, party: Party, found: Found) -> bool:
        """Connect to the relay where the partner waits and send the handshake there
        (with the waiter's ticket); False if that relay did not answer."""
        assert party.token is not None
        address = found.address
        line = handshake_line(party.token, party.side, found.ticket)
        loop = self.loop
        sock: socket.socket | None = None
        try:
            family, kind, proto, _, target = (
                await loop.getaddrinfo(address[0], address[1], type=socket.SOCK_STREAM)
            )[0]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            async with asyncio.timeout(self.config.handshake_timeout):
                await loop.sock_connect(sock, target)
                await loop.sock_sendall(sock, line)
        except (OSError, TimeoutError):
            log.warning("transit: no answer from the relay at %s:%d", *address)
            if sock is not None:
                sock.close()
            return False
        except BaseException:  # cancelled: the relay is closing
            if sock is not None:
                sock.close()
            raise
        if party.phase is not Phase.WAITING or self.core.draining:
            sock.close()  # gone meanwhile: the partner there sees a lonely client go
            return True
        endpoint = TcpEndpoint(loop, sock, self, self.config.close_timeout)
        step, peer = self.core.forward(party, endpoint, time.time())
        endpoint.party = peer
        self.live.add(peer)
        endpoint.resume_reading()
        self.run(step)
        return True

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
        for task in self._tasks:
            task.cancel()
        for pump in set(self._pumps.values()):
            pump.close()
        self._pumps.clear()
        self.pipes.close()
        for party in list(self.live):
            party.endpoint.abort()
