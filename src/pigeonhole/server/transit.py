"""The transit relay hosted by `pigeonhole serve`: one process for the whole wormhole.

The relay itself is the `transit` package (docs/transit.md): a sans-I/O pairing core and
TCP pairs moved by `os.splice` on this same event loop. This module is the server's side
of it: the relay's settings from the server's (`--transit-*`, `--blur-usage`), its TCP
listener on `--transit-port` on the same interfaces as `--host`, WebSocket transit at
`/transit` on the public port (the front door hands the upgraded connection over here,
sharing the relay's one pairing table with TCP), clients counted by the server's rule
(pigeonhole/clients.py: an IPv6 client is its prefix), and the drain on shutdown: no new
connection is taken, and active pairs get `--transit-drain-timeout` to finish. Each
connection's (or pair's) usage record goes to the server's store through the group
committer, like the mailbox's usage rows (`transit` in the usage database).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from pigeonhole.clients import client_key
from pigeonhole.config import ServerConfig
from pigeonhole.protocol import effects as fx
from pigeonhole.server.listen import ALL_ADDRESSES
from pigeonhole.server.rules import Deny, RuleSet
from pigeonhole.transit import TransitConfig, TransitRelay, UsageRecord
from pigeonhole.transit.peers import Address, Found, format_address, parse_address

log = logging.getLogger("pigeonhole.transit")

#: where browsers and other WebSocket clients reach the relay on the public port
TRANSIT_PATH = "/transit"


def transit_config(c: ServerConfig) -> TransitConfig:
    """The relay's bounds from the server's settings (declared once, in config.py)."""
    return TransitConfig(
        handshake_timeout=c.transit_handshake_timeout,
        lonely_timeout=c.transit_lonely_timeout,
        idle_timeout=c.transit_idle_timeout,
        max_connections_per_address=c.transit_max_connections_per_address,
        max_connections=c.transit_max_connections,
        pair_buffer_bytes=c.transit_pair_buffer_bytes,
        max_bytes_per_address_per_day=c.transit_max_bytes_per_address_per_day,
        max_bytes_per_transfer=c.transit_max_bytes_per_transfer,
        max_rate_bytes_per_second=c.transit_max_rate,
        drain_timeout=c.transit_drain_timeout,
        blur_usage=c.blur_usage or 0,
        log_summary_interval=c.log_summary_interval,
    )


class RuleHolder(Protocol):
    """Where the deny rules in force are (server/settings.py's Settings)."""

    @property
    def rules(self) -> RuleSet: ...


def admits(settings: RuleHolder, denied: Counter[str]) -> Callable[[str], bool]:
    """The TCP relay's check of a new connection's peer: a denied one is closed at once
    (it is counted in `denied`, by door); WebSocket clients are checked at the door."""

    def admit(host: str) -> bool:
        if isinstance(settings.rules.match(host), Deny):
            denied["tcp relay"] += 1
            return False
        return True

    return admit


class Committer(Protocol):
    """Where usage records go: the server's group committer (store/group_commit.py)."""

    def submit(self, effects: list[fx.Effect]) -> object: ...


#: a waiter's row on another node: its relay's address (HOST:PORT) and its ticket
Row = tuple[str, str | None]


class WaitingRows(Protocol):
    """The store's table of waiting connections, one node's view (store/postgres/)."""

    async def meet(self, token: str, side: str | None, ticket: str) -> Row | None: ...

    async def left(self, token: str, side: str | None) -> None: ...

    async def gone(self, address: str) -> None: ...


#: the store's rows for the node at an address, waiters older than an age ignored
WaitingFactory = Callable[[str, float], WaitingRows]


class SharedPairing:
    """The relay's pairing directory (transit/peers.py) on the store's rows."""

    def __init__(self, rows: WaitingRows) -> None:
        self.rows = rows

    async def meet(self, token: str, side: str | None, ticket: str) -> Found | None:
        found = await self.rows.meet(token, side, ticket)
        return None if found is None else Found(parse_address(found[0]), found[1])

    async def left(self, token: str, side: str | None) -> None:
        await self.rows.left(token, side)

    async def gone(self, address: Address) -> None:
        await self.rows.gone(format_address(address))


class TransitService:
    """The relay as the server runs it; each finished connection's record is committed."""

    def __init__(
        self,
        config: ServerConfig,
        committer: Committer,
        waiting: WaitingFactory | None = None,
        clock: Callable[[], float] = time.time,
        admit: Callable[[str], bool] = lambda host: True,
    ) -> None:
        self.config = config
        self._committer = committer
        self._waiting = waiting
        #: the shared store's rows of this node's waiters (None: pairs on this node only)
        self.rows: WaitingRows | None = None
        prefix = config.ipv6_prefix
        self.relay = TransitRelay(
            transit_config(config),
            usage=self._usage,
            address_key=lambda host: client_key(host, prefix),
            clock=clock,
            admit=admit,
        )
        #: the TCP port bound (the configured one, or the one picked for port 0)
        self.port: int | None = None

    def reconfigure(self, config: ServerConfig) -> None:
        """A reload's settings: the relay's caps and timeouts hold for what comes next
        (its listeners, and the pair buffer its pipes were sized by, stay as started)."""
        self.config = config
        self.relay.reconfigure(transit_config(config))

    def _usage(self, record: UsageRecord) -> None:
        """A relay connection or pair ended: its record joins the next commit (not awaited:
        the relay never waits for its store)."""
        self._committer.submit(
            [
                fx.UsageTransit(
                    record.started,
                    record.total_time,
                    record.waiting_time,
                    record.total_bytes,
                    str(record.result),
                )
            ]
        )

    async def start(self) -> None:
        host = self.config.host
        await self.relay.start(
            host=None if host == ALL_ADDRESSES else host, ports=[self.config.transit_port]
        )
        self.port = self.relay.ports[0]
        log.info("transit relay listening on %s:%d and at %s", host, self.port, TRANSIT_PATH)
        if self._waiting is not None:
            await self._share_pairing(self._waiting)

    @property
    def node_address(self) -> str:
        """Where the other nodes reach this relay (`--transit-node-address`)."""
        return self.config.transit_node_address or f"127.0.0.1:{self.port}"

    async def _share_pairing(self, waiting: WaitingFactory) -> None:
        """Pair across nodes: rows left by this address's last run are stale, dropped."""
        address = self.node_address
        parse_address(address)  # a bad setting fails the start, not each pair
        self.rows = waiting(address, self.config.transit_lonely_timeout)
        await self.rows.gone(address)
        self.relay.pair_across(SharedPairing(self.rows))
        log.info("transit: pairs across nodes meet on this node at %s", address)

    def accept_websocket(
        self, transport: asyncio.Transport, response: bytes, rest: bytes, client: str
    ) -> None:
        """Take a checked WebSocket upgrade at /transit (`response`: its 101, from
        server/doors.py); the relay owns the connection then."""
        transport.write(response)
        self.relay.attach_websocket(transport, client, rest)

    def stop_accepting(self) -> None:
        self.relay.close_listeners()

    async def stop(self) -> None:
        """Let active pairs finish, up to the drain time; then close everything."""
        waiting = self.relay.figures()["active_pairs"] if self.port is not None else 0
        if waiting:
            log.info("transit: draining %d active pairs (up to %g s)", waiting,
                     self.config.transit_drain_timeout)  # fmt: skip
        await self.relay.stop(self.config.transit_drain_timeout)
        if self.rows is not None:
            with contextlib.suppress(Exception):  # the next start drops them too
                await self.rows.gone(self.node_address)

    def stats(self) -> dict[str, Any]:
        """The relay's figures, refusals and moods keyed by plain strings (for JSON)."""
        if self.port is None:
            return {}
        stats = self.relay.figures()
        for name in ("refusals", "moods"):
            stats[name] = {str(key): count for key, count in stats[name].items()}
        return stats
