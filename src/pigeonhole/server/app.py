"""MailboxServer: listens, accepts and runs the timers; every part gets the context.

Lifecycle (uvicorn's shape): `start()` opens the databases, loads the live channels,
listens; `stop()` stops listening, flushes pending commits, closes every WebSocket with
1001, and closes the databases. Also an async context manager for tests.

What the parts share is built once, in dependency order, by server/wiring.py (the
context: server/context.py); this class holds only what listening needs: the public
listener (server/front_door.py in front of aiohttp, server/routes.py), the admin listener
(server/admin.py) and the periodic jobs (server/timers.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp import web

from pigeonhole import __version__
from pigeonhole.config import ServerConfig
from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.usage import blur as blur_time
from pigeonhole.server.admin import open_admin_listener
from pigeonhole.server.bad_input import http_logger
from pigeonhole.server.collector import COLLECTOR
from pigeonhole.server.core import Clock
from pigeonhole.server.doors import Doors
from pigeonhole.server.front_door import FrontDoor
from pigeonhole.server.listen import ALL_ADDRESSES, dual_stack_socket, tls_context
from pigeonhole.server.reloader import ReadConfig, Reloader
from pigeonhole.server.reloading import ReloadResult
from pigeonhole.server.routes import make_public_app
from pigeonhole.server.status import StatusRings
from pigeonhole.server.timers import start_jobs
from pigeonhole.server.transit import TRANSIT_PATH
from pigeonhole.server.wiring import build_context
from pigeonhole.store.errors import StoreError

log = logging.getLogger("pigeonhole.server")

CLOSE_GOING_AWAY = 1001
#: a connection quiet for one to two of these is pinged, and dropped one later if silent
HEARTBEAT_INTERVAL = 30.0
#: seconds between the heartbeat's slices (each takes its share of the round)
HEARTBEAT_TICK = 1.0
#: seconds between the status rings' samples (server/status.py)
STATUS_TICK = 1.0
#: seconds between measures of the usage database's size (the status page's)
USAGE_SIZE_INTERVAL = 60.0


class MailboxServer:
    def __init__(
        self, config: ServerConfig, clock: Clock = time.time, read_config: ReadConfig | None = None
    ) -> None:
        #: what every part shares (server/context.py); a bad --deny-file: RuleError
        self.ctx = build_context(config, clock)
        #: SIGHUP: the settings read again by `read_config` (as `serve` read them), and
        #: the rules (server/reloader.py)
        self.reloader = Reloader(self.ctx, read_config)
        self.app = make_public_app(self.ctx)
        #: the live status page's rings, and the admin listener that serves it (and
        #: /metrics); `admin_port` is the bound port once started (None: no listener)
        self.status = StatusRings(self.ctx)
        self.admin_port: int | None = None
        self.port = config.port
        self._runner: web.AppRunner | None = None
        self._admin_runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self._timers: list[asyncio.Task[None]] = []

    @property
    def config(self) -> ServerConfig:
        """The settings in force."""
        return self.ctx.config

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        ctx = self.ctx
        c = ctx.config
        loop = asyncio.get_running_loop()
        ctx.uptime.started = ctx.clock()
        COLLECTOR.install()
        c.data_dir.mkdir(parents=True, exist_ok=True)  # the archive's, at least
        ctx.health.check_disk()
        await ctx.storage.open(ctx.rendezvous, ctx.uptime.started)
        await ctx.decider.start()
        nameplates, mailboxes = ctx.decider.alive()
        await ctx.storage.measure_usage()
        self.status.begin(ctx.uptime.started)
        if c.admin:
            self._admin_runner, self.admin_port = await open_admin_listener(ctx, self.status)
        self._runner = web.AppRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            logger=http_logger(ctx.events.bad_input),
        )
        await self._runner.setup()
        http = self._runner.server
        assert http is not None
        doors = Doors(ctx)
        transit_path = TRANSIT_PATH if ctx.transit is not None else None
        where: dict[str, Any] = (
            {"sock": dual_stack_socket(c.port)}
            if c.host == ALL_ADDRESSES
            else {"host": c.host, "port": c.port, "reuse_address": True}
        )
        self._listener = await loop.create_server(
            lambda: FrontDoor(
                doors,
                http,
                c.websocket_path,
                c.handshake_timeout,
                transit_path,
                ctx.events.bad_input,
            ),
            backlog=4096,
            ssl=tls_context(c.tls_cert, c.tls_key),
            **where,
        )
        if c.port == 0 and self._listener.sockets:
            self.port = self._listener.sockets[0].getsockname()[1]
        if ctx.transit is not None:
            await ctx.transit.start()
        self._timers = start_jobs(
            loop,
            [
                (c.prune_interval, self.prune_now),
                (c.usage_sample_interval, self.sample_usage),
                # a slow reader is noticed within a quarter of the send timeout
                (min(max(c.send_timeout / 4, 0.25), 5.0), self.sweep_slow_readers),
                (HEARTBEAT_TICK, self.heartbeat_tick),
                (c.disk_check_interval, ctx.health.check_disk),
                (USAGE_SIZE_INTERVAL, ctx.storage.measure_usage),
                (c.log_summary_interval, ctx.events.summary.flush),
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
        c = self.ctx.config
        scheme = "wss" if c.tls_cert is not None else "ws"
        host = f"[{c.host}]" if ":" in c.host else c.host
        return f"{scheme}://{host}:{self.port}{c.websocket_path}"

    async def stop(self) -> None:
        ctx = self.ctx
        for timer in self._timers:
            timer.cancel()
        if self._listener is not None:
            self._listener.close()  # stop accepting
        if ctx.transit is not None:
            ctx.transit.stop_accepting()
        await self._drain_or_abandon()
        await self._close_all(CLOSE_GOING_AWAY, "server shutting down")
        if self._runner is not None:
            await self._runner.cleanup()
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
        if ctx.transit is not None:
            await ctx.transit.stop()  # active pairs finish, up to the drain time
        await self._drain_or_abandon()
        await ctx.decider.stop()
        ctx.events.summary.flush()
        await ctx.storage.close()
        log.info("pigeonhole stopped")

    async def _drain_or_abandon(self) -> None:
        """Wait for pending commits; if storage keeps failing, give up on them (bounded)."""
        committer = self.ctx.committer
        if not await committer.drain(self.ctx.config.shutdown_timeout):
            log.error("stopping with storage failing: the unwritten batches are given up")
            committer.abandon(StoreError("server stopped while storage was failing"))

    async def _close_all(self, code: int, message: str) -> None:
        conns = list(self.ctx.clients)
        if conns:
            await asyncio.gather(*(c.close(code, message) for c in conns), return_exceptions=True)

    async def __aenter__(self) -> MailboxServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def reload(self, read: ReadConfig | None = None) -> ReloadResult:
        """Read the settings (by `read`, or as at start) and the rules again, and take
        them without a restart (server/reloader.py); a bad file changes nothing."""
        return await self.reloader.reload(read)

    # -- timers -------------------------------------------------------------------

    def heartbeat_tick(self) -> None:
        """Ping this tick's share of the quiet connections (server/connections.py)."""
        self.ctx.clients.heartbeat_tick(time.monotonic(), HEARTBEAT_INTERVAL)

    def sweep_slow_readers(self) -> None:
        """Drop clients that have stayed behind (unread bytes) for the send timeout."""
        self.ctx.clients.sweep_slow_readers(time.monotonic())

    async def prune_now(self) -> int:
        """Prune idle channels and wait until the deletions are committed.

        With several nodes, only the leader prunes (server/node/).
        """
        pruned = await self.ctx.decider.prune()
        self.ctx.metrics.pruned_mailboxes += pruned
        if pruned:
            log.info("pruned %d idle mailboxes", pruned)
        return pruned

    async def sample_usage(self) -> None:
        """Connection and channel counts into the usage records; with several nodes,
        the leader writes one sample for the whole server."""
        ctx = self.ctx
        now = ctx.clock()
        counts = await ctx.decider.usage_counts(now)
        if counts is None:
            return
        connections, bound, subscribed, nameplates, mailboxes = counts
        blur = ctx.config.blur_usage
        sample = fx.UsageConnectionCount(
            sampled=blur_time(now, blur),
            connections=connections,
            bound=bound,
            subscribed=subscribed,
            nameplates=nameplates,
            mailboxes=mailboxes,
            rebooted=blur_time(ctx.uptime.started, blur),
            blur_time=blur,
        )
        barrier = ctx.committer.submit([sample])
        if barrier is not None:
            await barrier
