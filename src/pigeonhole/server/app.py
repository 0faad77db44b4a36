"""MailboxServer: owns the store, the rendezvous state, the HTTP site and the timers.

Lifecycle (uvicorn's shape): `start()` opens the databases, loads the live channels,
listens; `stop()` stops listening, flushes pending commits, closes every WebSocket with
1001, and closes the databases. Also an async context manager for tests.

The parts it owns are each a module of their own: how commands are decided (deciding.py,
chosen with the store in storage.py), storage trouble (health.py), the public HTTP routes
(routes.py), the admin listener (admin.py) and the periodic jobs (timers.py).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from aiohttp import web

from pigeonhole import __version__
from pigeonhole.clients import client_key
from pigeonhole.config import ServerConfig
from pigeonhole.permissions.policy import PermissionPolicy
from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.bodies import BodyCache
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.protocol.limits import LIMIT_ERRORS
from pigeonhole.protocol.usage import blur as blur_time
from pigeonhole.protocol.welcome import welcome_body, your_address
from pigeonhole.server.addresses import Client, client_address, parse_networks
from pigeonhole.server.admin import open_admin_listener
from pigeonhole.server.bad_input import BadInput, http_logger
from pigeonhole.server.connection import Connection
from pigeonhole.server.context import Peer
from pigeonhole.server.deciding import Decider
from pigeonhole.server.front_door import FrontDoor
from pigeonhole.server.handshake import HandshakeError, Head, accept, reject
from pigeonhole.server.health import StorageHealth
from pigeonhole.server.listen import ALL_ADDRESSES, dual_stack_socket, tls_context
from pigeonhole.server.log_summary import LogSummary
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.replay import BodyLoader
from pigeonhole.server.routes import make_public_app
from pigeonhole.server.status import StatusRings
from pigeonhole.server.storage import make_storage
from pigeonhole.server.timers import start_jobs
from pigeonhole.server.transit import TRANSIT_PATH, TransitService
from pigeonhole.server.websocket import MailboxSocket
from pigeonhole.store.errors import StoreError
from pigeonhole.store.group_commit import GroupCommitter, Syncer
from pigeonhole.store.sqlite.helper import StoreHelper

log = logging.getLogger("pigeonhole.server")

CLOSE_GOING_AWAY = 1001
#: a connection quiet for one to two of these is pinged, and dropped one later if silent
HEARTBEAT_INTERVAL = 30.0
#: seconds between the status rings' samples (server/status.py)
STATUS_TICK = 1.0


def new_mailbox_id() -> str:
    """13 characters of base32: 64 random bits, as the reference makes them."""
    return base64.b32encode(secrets.token_bytes(8)).decode("ascii").lower().strip("=")


SECURE_RANDOMNESS = Randomness(secrets.choice, secrets.randbelow, new_mailbox_id)


class MailboxServer:
    def __init__(self, config: ServerConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.metrics = Metrics()
        self.permissions = PermissionPolicy(
            methods=config.permissions,
            bits=config.hashcash_bits,
            max_bits=max(config.hashcash_max_bits, config.hashcash_bits),
            load_threshold=config.hashcash_load_threshold,
        )
        self._per_address: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.rendezvous = Rendezvous(
            SECURE_RANDOMNESS, config.blur_usage, config.limits, BodyCache(config.body_cache_bytes)
        )
        #: quotas per client address, and the storage state that refuses new data
        self.ledger = self.rendezvous.ledger
        #: where the state is stored: SQLite in the data directory, or PostgreSQL
        self.storage = make_storage(config)
        self.log_summary = LogSummary(log, time.monotonic)
        #: malformed input at every door, counted by (door, kind) (server/bad_input.py)
        self.bad_input = BadInput(self.log_summary)
        #: failing commits and a full disk: what is refused meanwhile, and /health's reason
        self.health = StorageHealth(
            config,
            self.storage,
            self.ledger,
            (self.metrics, self.log_summary),
            lambda: self.committer.failing,
        )
        self.disk = self.health.disk
        syncer: Syncer = self.storage.syncer
        self.committer = GroupCommitter(
            syncer, self.health.failed, self.metrics.observe_commit, self.health.recovered
        )
        self.connections: set[Connection] = set()
        #: how commands are decided: in memory as they arrive (SQLite), or in batches in
        #: the database this process shares with other nodes (PostgreSQL)
        self.decider: Decider = self.storage.decider(self, SECURE_RANDOMNESS)
        self._trusted = parse_networks(config.trusted_proxies)
        self._prefix = config.ipv6_prefix
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._started_at = 0.0
        self.port = config.port
        self.app = make_public_app(self, self._peer_of, self.health.refusing)
        #: the live status page's rings, and the admin listener that serves it (and
        #: /metrics); `admin_port` is the bound port once started (None: no listener)
        self.status = StatusRings(self)
        self._admin_runner: web.AppRunner | None = None
        self.admin_port: int | None = None
        #: the transit relay, in this process (None: --no-transit)
        self.transit = (
            TransitService(config, self.committer, self.storage.transit_waiting())
            if config.transit
            else None
        )

    # -- HTTP -------------------------------------------------------------------

    def _client(
        self, transport: asyncio.BaseTransport | None, headers: Mapping[str, str]
    ) -> Client:
        """The client's (host, port) as limits see it (trusted proxies honoured; a header
        of theirs that does not parse is counted and left out)."""
        peer = transport.get_extra_info("peername") if transport else None
        client = client_address((peer[0], peer[1]) if peer else None, headers, self._trusted)
        if client.bad_header is not None:
            self.bad_input.note("proxy-header", client.bad_header)
        return client

    def _peer_of(self, request: web.Request) -> str:
        """Who an archive request is, for its quota and rate (one client: clients.py)."""
        return client_key(self._client(request.transport, request.headers).host, self._prefix)

    def health_problem(self) -> str | None:
        """Why /health answers 503 now, or None when it answers `ok`."""
        return self.health.problem()

    @property
    def helper(self) -> StoreHelper | None:
        """The SQLite store helper process, when it commits (`--commit-sync process`)."""
        return self.storage.helper

    @property
    def bodies(self) -> BodyLoader:
        """Reads replayed bodies the cache no longer holds."""
        return self.storage.bodies

    @property
    def started_at(self) -> float:
        return self._started_at

    @property
    def connections_by_address(self) -> Counter[str]:
        """Live WebSocket connections per client address (read-only use)."""
        return self._per_address

    def accept_websocket(self, transport: asyncio.Transport, head: Head, rest: bytes) -> None:
        """Answer a mailbox handshake; on success the connection runs on a MailboxSocket."""
        host, port, _ = self._client(transport, head.headers)
        client = client_key(host, self._prefix)  # what every per-address bound counts
        refusal = self._admission(client)
        refused = reject(*refusal) if refusal is not None else None
        if refused is None:
            try:
                response = accept(head)
            except HandshakeError as invalid:
                self.bad_input.note("handshake", invalid.kind)
                refused = invalid.response
        if refused is not None:
            transport.write(refused)
            transport.close()
            return
        # no permessage-deflate: frames are small JSON, written as they are produced
        socket = MailboxSocket(transport, self.config.max_frame_bytes)
        transport.set_protocol(socket)
        socket.begin()
        conn = Connection(self, socket, client, host, port)  # queues the welcome
        socket.conn = conn
        socket.end(preamble=response)  # the 101 and the welcome leave in one write
        self.connections.add(conn)
        self._per_address[client] += 1
        self.metrics.connections_total += 1
        if rest:
            socket.data_received(rest)

    def accept_transit(self, transport: asyncio.Transport, head: Head, rest: bytes) -> None:
        """A WebSocket upgrade at /transit: the relay's, counted by the client rule."""
        if self.transit is None:
            transport.write(reject(404, "no transit relay here\n"))
            transport.close()
            return
        host = self._client(transport, head.headers).host
        try:
            accept(head)
        except HandshakeError as invalid:
            self.bad_input.note("handshake", invalid.kind)
            transport.write(invalid.response)
            transport.close()
            return
        self.transit.accept_websocket(transport, head, rest, client_key(host, self._prefix))

    def detach(self, conn: Connection) -> None:
        """The connection is gone: it no longer counts against the limits."""
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        host = conn.address
        self._per_address[host] -= 1
        if self._per_address[host] <= 0:
            del self._per_address[host]

    def _admission(self, host: str) -> tuple[int, str] | None:
        """Refuse the handshake (HTTP 503/429 with a plain reason) when over a limit."""
        c = self.config
        if len(self.connections) >= c.max_connections:
            self.metrics.count_limit("max connections")
            return 503, "server is at its connection limit\n"
        if self._per_address[host] >= c.max_connections_per_address:
            self.metrics.count_limit("connections per address")
            self.event(
                "refused connection: too many from one address",
                None,
                kind="connections per address",
                address=host,
            )
            return 429, "too many connections from your address\n"
        return None

    def welcome(
        self, host: str, port: int | None, permission_required: dict[str, object]
    ) -> dict[str, object]:
        """The welcome body for a client at (host, port), with its permission challenge."""
        c = self.config
        extra: dict[str, object] = {"permission-required": permission_required}
        if c.disallow_list:
            extra["list-disabled"] = True
        return welcome_body(
            motd=c.motd,
            signal_error=c.signal_error,
            advertise_version=c.advertise_version,
            address=your_address(host, port),
            extra=extra,
        )

    # -- logging and tasks ----------------------------------------------------------

    def event(
        self, what: str, conn: Peer | None, kind: str | None = None, **fields: object
    ) -> None:
        """One structured log line; client addresses are left out under --blur-usage.

        With a `kind`, repeats within the summary interval are counted, not written
        (server/log_summary.py): refusals under attack cost one line per kind a minute.
        """
        if self.config.blur_usage:
            fields.pop("address", None)
        elif conn is not None:
            fields.setdefault("address", conn.address)
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        line = f"{what} {detail}"
        if kind is None:
            log.info("%s", line, extra={"fields": fields})
        else:
            self.log_summary.note(kind, line, fields)

    def refused(self, explain: str, conn: Peer) -> None:
        """A command got an `error`: counted by kind; limit and quota refusals logged."""
        kind = self.metrics.count_error(explain)
        if kind in LIMIT_ERRORS:
            self.event("refused", conn, kind=kind, error=explain)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._started_at = self.clock()
        self.config.data_dir.mkdir(parents=True, exist_ok=True)  # the archive's, at least
        self.health.check_disk()
        await self.storage.open(self.rendezvous, self._started_at)
        await self.decider.start()
        nameplates, mailboxes = self.alive()
        self.status.begin(self._started_at)
        if self.config.admin:
            self._admin_runner, self.admin_port = await open_admin_listener(self, self.status)
        self._runner = web.AppRunner(
            self.app, access_log=None, handle_signals=False, logger=http_logger(self.bad_input)
        )
        await self._runner.setup()
        http = self._runner.server
        assert http is not None
        path = self.config.websocket_path
        transit_path = TRANSIT_PATH if self.transit is not None else None
        host, port = self.config.host, self.config.port
        where: dict[str, Any] = (
            {"sock": dual_stack_socket(port)}
            if host == ALL_ADDRESSES
            else {"host": host, "port": port, "reuse_address": True}
        )
        self._listener = await loop.create_server(
            lambda: FrontDoor(
                self, http, path, self.config.handshake_timeout, transit_path, self.bad_input
            ),
            backlog=4096,
            ssl=tls_context(self.config.tls_cert, self.config.tls_key),
            **where,
        )
        if self.config.port == 0 and self._listener.sockets:
            self.port = self._listener.sockets[0].getsockname()[1]
        if self.transit is not None:
            await self.transit.start()
        c = self.config
        self._timers = start_jobs(
            loop,
            [
                (c.prune_interval, self.prune_now),
                (c.usage_sample_interval, self.sample_usage),
                # a slow reader is noticed within a quarter of the send timeout
                (min(max(c.send_timeout / 4, 0.25), 5.0), self.sweep_slow_readers),
                (HEARTBEAT_INTERVAL, self.heartbeat),
                (c.disk_check_interval, self.health.check_disk),
                (c.log_summary_interval, self.log_summary.flush),
                (STATUS_TICK, self.status.tick),
            ],
        )
        log.info(
            "pigeonhole %s listening on %s (resumed %d nameplates, %d mailboxes)",
            __version__,
            self.url,
            nameplates,
            mailboxes,
        )

    @property
    def url(self) -> str:
        scheme = "wss" if self.config.tls_cert is not None else "ws"
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.port}{self.config.websocket_path}"

    async def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        if self._listener is not None:
            self._listener.close()  # stop accepting
        if self.transit is not None:
            self.transit.stop_accepting()
        await self._drain_or_abandon()
        await self._close_all(CLOSE_GOING_AWAY, "server shutting down")
        if self._runner is not None:
            await self._runner.cleanup()
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
        if self.transit is not None:
            await self.transit.stop()  # active pairs finish, up to the drain time
        await self._drain_or_abandon()
        await self.decider.stop()
        self.log_summary.flush()
        await self.storage.close()
        log.info("pigeonhole stopped")

    async def _drain_or_abandon(self) -> None:
        """Wait for pending commits; if storage keeps failing, give up on them (bounded)."""
        if not await self.committer.drain(self.config.shutdown_timeout):
            log.error("stopping with storage failing: the unwritten batches are given up")
            self.committer.abandon(StoreError("server stopped while storage was failing"))

    async def _close_all(self, code: int, message: str) -> None:
        conns = list(self.connections)
        if conns:
            await asyncio.gather(*(c.close(code, message) for c in conns), return_exceptions=True)

    async def __aenter__(self) -> MailboxServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- timers -------------------------------------------------------------------

    def heartbeat(self) -> None:
        """Ping connections quiet for a sweep; drop those that ignored the last ping."""
        for conn in list(self.connections):
            conn.socket.heartbeat()

    def sweep_slow_readers(self) -> None:
        """Drop clients that have stayed behind (unread bytes) for the send timeout."""
        now = time.monotonic()
        timeout = self.config.send_timeout
        for conn in list(self.connections):
            conn.check_behind(now, timeout)

    def alive(self) -> tuple[int, int]:
        """(nameplates, mailboxes) alive: in memory, or in the shared database."""
        return self.decider.alive()

    async def prune_now(self) -> int:
        """Prune idle channels and wait until the deletions are committed.

        With several nodes, only the leader prunes (server/node/).
        """
        pruned = await self.decider.prune()
        self.metrics.pruned_mailboxes += pruned
        if pruned:
            log.info("pruned %d idle mailboxes", pruned)
        return pruned

    async def sample_usage(self) -> None:
        """Connection and channel counts into the usage records; with several nodes,
        the leader writes one sample for the whole server."""
        now = self.clock()
        counts = await self.decider.usage_counts(now)
        if counts is None:
            return
        connections, bound, subscribed, nameplates, mailboxes = counts
        blur = self.config.blur_usage
        sample = fx.UsageConnectionCount(
            sampled=blur_time(now, blur),
            connections=connections,
            bound=bound,
            subscribed=subscribed,
            nameplates=nameplates,
            mailboxes=mailboxes,
            rebooted=blur_time(self._started_at, blur),
            blur_time=blur,
        )
        barrier = self.committer.submit([sample])
        if barrier is not None:
            await barrier

    # -- failure (a shared store's batches; the committer calls `health` itself) --------

    def storage_failed(self, err: BaseException) -> None:
        """A shared-store batch failed; it is decided again until it commits."""
        self.health.failed(err)

    def storage_recovered(self) -> None:
        self.health.recovered()

    def observe_commit(self, seconds: float) -> None:
        self.metrics.observe_commit(seconds)
