"""The transit relay service: TCP listeners, WebSocket attachment, a bounded drain.

`TransitRelay.start` listens on the given host(s) and port(s), or on sockets already
bound by the caller; accepted sockets are owned by the relay (tcp.py) and paired by the
core. `attach_websocket` takes an upgraded WebSocket from the server's front door into
the same pairing table. `stop` stops accepting, closes unpaired connections, lets active
pairs finish for up to `drain_timeout` (it returns as soon as the last one has ended),
then closes everything. Finished usage records go to the `usage` sink (a callback, or a
`UsageQueue`). Every time the relay reads is its `clock`'s (wall-clock seconds, as the
mailbox's; a test passes one it moves, then calls `check_timeouts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.hub import Hub
from pigeonhole.transit.party import Party
from pigeonhole.transit.peers import Directory
from pigeonhole.transit.tcp import TcpEndpoint
from pigeonhole.transit.usage import UsageRecord, UsageSink
from pigeonhole.transit.websocket import TransitWebSocket

#: connections accepted per readiness callback (the rest wait for the next loop turn)
ACCEPT_BATCH = 64
BACKLOG = 1024
#: after an accept failed (out of descriptors), the listener is watched again this late
ACCEPT_RETRY_SECONDS = 0.5


def _ignore(record: UsageRecord) -> None:
    return None


def _anyone(host: str) -> bool:
    return True


def plain_address(host: str) -> str:
    """The default address key: the peer's host as given (the server maps IPv6 to /64)."""
    return host


def _listen(host: str | None, port: int) -> socket.socket:
    """A listening socket; `::` (or None) is every IPv6 and IPv4 address in one socket."""
    dual = host in (None, "", "::")
    family = socket.AF_INET6 if dual or ":" in (host or "") else socket.AF_INET
    return socket.create_server(
        (host or "", port), family=family, backlog=BACKLOG, dualstack_ipv6=dual
    )


class TransitRelay:
    """The relay: one pairing table for its TCP listeners and attached WebSockets."""

    def __init__(
        self,
        config: TransitConfig | None = None,
        usage: UsageSink = _ignore,
        address_key: Callable[[str], str] = plain_address,
        splice: bool = True,
        directory: Directory | None = None,
        clock: Callable[[], float] = time.time,
        admit: Callable[[str], bool] = _anyone,
    ) -> None:
        #: where relays sharing pairs record waiting connections (peers.py); None: alone
        self.directory = directory
        #: asked with a TCP peer's address before anything else: False closes it at once
        #: (the server's deny rules); WebSocket clients are checked at the server's door
        self.admit = admit
        self.clock = clock
        self.config = config or TransitConfig()
        self._usage = usage
        self.address_key = address_key
        self._splice = splice
        self._hub: Hub | None = None
        self._listeners: list[socket.socket] = []

    @property
    def hub(self) -> Hub:
        assert self._hub is not None, "start() first"
        return self._hub

    @property
    def ports(self) -> list[int]:
        return [int(sock.getsockname()[1]) for sock in self._listeners]

    async def start(
        self,
        host: str | Sequence[str] | None = "127.0.0.1",
        ports: Sequence[int] = (),
        sockets: Sequence[socket.socket] = (),
    ) -> None:
        """Listen on every (host, port), and on `sockets` (bound, listening or not)."""
        self._hub = Hub(
            self.config, self._usage, self.clock, splice=self._splice, directory=self.directory
        )
        hosts = [host] if isinstance(host, str) or host is None else list(host)
        listeners = list(sockets)
        for port in ports:
            listeners += [_listen(name, port) for name in hosts]
        loop = asyncio.get_running_loop()
        for sock in listeners:
            sock.listen(BACKLOG)
            sock.setblocking(False)
            loop.add_reader(sock.fileno(), self._accept, sock)
        self._listeners = listeners

    def _accept(self, listener: socket.socket) -> None:
        hub = self.hub
        for _ in range(ACCEPT_BATCH):
            try:
                conn, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: retried in a while, not on every turn
                self._pause_accepting(listener)
                return
            if not self.admit(str(peer[0])):
                conn.close()  # denied by a rule: a plain close, nothing read
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            endpoint = TcpEndpoint(hub.loop, conn, hub, self.config.close_timeout)
            party = hub.open(endpoint, self.address_key(str(peer[0])))
            if not isinstance(party, Party):
                conn.close()  # refused (too many connections): a plain close
                continue
            endpoint.party = party
            endpoint.resume_reading()

    def _pause_accepting(self, listener: socket.socket) -> None:
        """The listener stays readable while a connection waits: stop watching it a while."""
        loop = self.hub.loop
        loop.remove_reader(listener.fileno())

        def resume() -> None:
            if listener in self._listeners:
                loop.add_reader(listener.fileno(), self._accept, listener)

        loop.call_later(ACCEPT_RETRY_SECONDS, resume)

    def attach_websocket(
        self, transport: asyncio.Transport, address: str, rest: bytes = b""
    ) -> TransitWebSocket | None:
        """Take an upgraded WebSocket (its 101 already sent); None if refused (closed 1013)."""
        hub = self.hub
        config = self.config
        endpoint = TransitWebSocket(
            transport, hub, config.direction_buffer_bytes, config.close_timeout
        )
        transport.set_protocol(endpoint)
        party = hub.open(endpoint, address)
        if not isinstance(party, Party):
            endpoint.refuse_now(party)
            return None
        endpoint.party = party
        if rest:
            endpoint.data_received(rest)
        return endpoint

    def reconfigure(self, config: TransitConfig) -> None:
        """Take new bounds (a reload): what comes next is held to them. The pair buffer
        (its pipes are sized once) and the sweep interval stay as started."""
        self.config = config
        if self._hub is not None:
            self._hub.config = self._hub.core.config = config

    def pair_across(self, directory: Directory) -> None:
        """From now on, sides that wait here are recorded in `directory`, shared with other
        relays, and a side whose partner waits on one of them is joined to it there
        (peers.py). A running relay takes it too: its address is known once it listens."""
        self.directory = directory
        if self._hub is not None:
            self._hub.dialer.directory = directory

    def check_timeouts(self) -> None:
        """Close the connections past a timeout now (the relay does it every
        `sweep_interval`; a test that moved the clock need not wait for it)."""
        self.hub.check_timeouts()

    def held_bytes(self) -> int:
        """Bytes the relay holds for clients now: queues, socket write buffers, pipes."""
        return self.hub.held_bytes()

    def figures(self) -> dict[str, Any]:
        """Figures for the status page and metrics (connections, waiting, active pairs,
        bytes relayed, refusals and moods by kind)."""
        core = self.hub.core
        return {
            "connections": core.connections,
            "waiting": core.waiting,
            "active_pairs": core.active_pairs,
            "bytes_relayed": core.bytes_relayed,
            "refusals": dict(core.refusals.counts),
            "moods": dict(core.moods),
        }

    def close_listeners(self) -> None:
        if self._hub is not None:
            for sock in self._listeners:
                self._hub.loop.remove_reader(sock.fileno())
                sock.close()
        self._listeners = []

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Stop accepting; active pairs get up to `drain_timeout` to finish; then close all."""
        if self._hub is None:
            return
        hub, core = self._hub, self._hub.core
        drain = self.config.drain_timeout if drain_timeout is None else drain_timeout
        self.close_listeners()
        hub.run(core.close_unpaired(self.clock()))
        await hub.settled(lambda: not core.active_pairs, drain)
        hub.run(core.end_all_pairs(self.clock()))
        await hub.settled(lambda: not hub.live, min(self.config.close_timeout, 2.0))
        hub.close()
        with contextlib.suppress(Exception):
            await asyncio.sleep(0)
