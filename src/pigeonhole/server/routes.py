"""The public listener's plain HTTP routes, beside the mailbox WebSocket the front door takes.

`/` answers `Wormhole Relay` (a load balancer's check) or, to a browser, the web page
(pigeonhole/web: its assets at `/web/`, unless `--no-web`), `/health` 200 `ok` or 503 with the
reason, `/metrics` only with `--public-metrics` (it lives on the admin listener), the
WebSocket path a hint for browsers, and the archive its own routes (docs/archive.md).
`/health` and `/metrics` are served by the admin listener too (server/admin.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.endpoint import add_archive_routes
from pigeonhole.server.context import ServerView
from pigeonhole.server.exposition import render_metrics
from pigeonhole.server.transit import TRANSIT_PATH
from pigeonhole.web.serving import Site, WebPage, load_assets

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_public_app(
    server: ServerView,
    peer_of: Callable[[web.Request], str],
    refusing: Callable[[], str | None],
) -> web.Application:
    """The aiohttp app of the public listener (`peer_of`, `refusing`: for the archive)."""
    c = server.config
    app = web.Application()
    if c.web:
        WebPage(lambda: _site(server), load_assets()).add_routes(app)
    else:
        app.router.add_get("/", _root)
    app.router.add_get("/health", health_handler(server))
    if c.public_metrics:  # else on the admin listener only
        app.router.add_get("/metrics", metrics_handler(server))
    app.router.add_get(c.websocket_path, _websocket)
    if c.archive:
        archive = ArchiveConfig(
            data_dir=c.data_dir,
            password=c.archive_password,
            min_request_interval=c.archive_min_request_interval,
            retention_days=c.archive_retention_days,
            min_pow=c.archive_min_pow,
            max_bytes_per_address=c.archive_max_bytes_per_address,
            max_bytes=c.archive_max_bytes,
            min_disk_free=c.archive_disk_free,
            store_owners=not c.blur_usage,
            ipv6_prefix=c.ipv6_prefix,
        )
        add_archive_routes(app, archive, clock=server.clock, peer_of=peer_of, refusing=refusing)
    return app


def _site(server: ServerView) -> Site:
    """What the page's config.json says: read per request, as the relay binds its port late."""
    relay = server.transit
    return Site(
        mailbox=server.config.websocket_path,
        transit=TRANSIT_PATH if relay is not None else None,
        transit_tcp_port=relay.port if relay is not None else None,
    )


def health_handler(server: ServerView) -> Handler:
    async def health(request: web.Request) -> web.Response:
        problem = server.health_problem()
        if problem is not None:
            return web.Response(status=503, text=f"{problem}\n")
        return web.Response(text="ok\n")

    return health


def metrics_handler(server: ServerView) -> Handler:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=render_metrics(server), content_type="text/plain", charset="utf-8")

    return metrics


async def _root(request: web.Request) -> web.Response:
    return web.Response(text="Wormhole Relay\n")


async def _websocket(request: web.Request) -> web.StreamResponse:
    # WebSocket handshakes never get here: the front door takes them (accept_websocket)
    return web.Response(text="Magic Wormhole mailbox: connect with a WebSocket client\n")
