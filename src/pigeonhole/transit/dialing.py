"""Pairs across relays, the I/O side: the directory asked, the partner's relay dialled.

peers.py says what the directory is and what travels on the wire; this module is what a
relay does with it. When a connection starts waiting here, the directory either records
it (its ticket kept) or names the relay where a compatible side waits; then this relay
connects to that one as a client, sends the handshake line with the waiter's ticket, and
hands the connected socket to the hub (hub.py), which joins it to the waiting side like
a pair. A record is removed once its side pairs or goes. None of this blocks a
connection: each ask is a task, and a directory or relay that fails only loses the
pairing across nodes (the side still pairs with a partner that reaches this relay).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import typing
from collections.abc import Coroutine
from typing import Any

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.party import Party, Phase, Step
from pigeonhole.transit.peers import Directory, Found, handshake_line, new_ticket

log = logging.getLogger("pigeonhole.transit")


class DialHost(typing.Protocol):
    """What dialing needs of the relay (hub.py's Hub)."""

    loop: asyncio.AbstractEventLoop
    config: TransitConfig

    def forward(self, party: Party, sock: socket.socket) -> None:
        """`sock` reaches the relay where `party`'s partner waits (the line sent): join."""


class Dialer:
    """One relay's waiters recorded in the shared directory, and its dials to the others."""

    __slots__ = ("_host", "_recorded", "_tasks", "directory")

    def __init__(self, host: DialHost, directory: Directory | None) -> None:
        self._host = host
        #: where relays sharing pairs record waiting connections (None: pairs here only)
        self.directory = directory
        #: waiting parties recorded in the directory (removed when they pair or go)
        self._recorded: set[Party] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def waiting(self, party: Party) -> None:
        """`party` has just begun to wait: recorded, or joined to its partner's relay."""
        if self.directory is not None:
            self._spawn(self._meet(party, self.directory))

    def ran(self, step: Step) -> None:
        """The hub carried out `step`: the records of the parties it ended or paired go."""
        if self._recorded:
            self._unrecord([party for party, _ in step.closes])
            if step.paired is not None:
                self._unrecord([step.paired.partner])

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self._host.loop.create_task(work)
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
        elif party.phase is Phase.WAITING and not await self._dial(party, found):
            try:
                await directory.gone(found.address)
            except Exception:
                log.exception("transit: the pairing directory failed")
                return
            if tries > 1 and party.phase is Phase.WAITING:
                await self._meet(party, directory, tries - 1)

    async def _dial(self, party: Party, found: Found) -> bool:
        """Connect to the relay where the partner waits and send the handshake there
        (with the waiter's ticket); False if that relay did not answer."""
        assert party.token is not None
        address = found.address
        line = handshake_line(party.token, party.side, found.ticket)
        loop = self._host.loop
        sock: socket.socket | None = None
        try:
            family, kind, proto, _, target = (
                await loop.getaddrinfo(address[0], address[1], type=socket.SOCK_STREAM)
            )[0]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            async with asyncio.timeout(self._host.config.handshake_timeout):
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
        self._host.forward(party, sock)
        return True
