"""The public listener's plain HTTP routes, beside the mailbox WebSocket the front door takes.

`/` answers `Wormhole Relay` (a load balancer's check) or, to a browser, the web page
(pigeonhole/web: its assets at `/web/`, unless `--no-web`), `/health` 200 `ok` or 503 with the
reason, `/metrics` only with `--public-metrics` (it lives on the admin listener), the
WebSocket path a hint for browsers, and the archive its own routes (docs/archive.md), to
which a client a deny rule names gets 403 and the reason (server/rules.py).
`/health` and `/metrics` are served by the admin listener too (server/admin.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from pigeonhole.archive.endpoint import serve_archive
from pigeonhole.server.context import ServerContext
from pigeonhole.server.exposition import Exposition
from pigeonhole.server.rules import Deny
from pigeonhole.server.transit import TRANSIT_PATH
from pigeonhole.web.serving import Site, WebPage, load_assets

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_public_app(ctx: ServerContext) -> web.Application:
    """The aiohttp app of the public listener."""
    c = ctx.config
    app = web.Application(middlewares=[_deny_archive(ctx)] if ctx.archive is not None else [])
    if c.web:
        WebPage(lambda: _site(ctx), load_assets()).add_routes(app)
    else:
        app.router.add_get("/", _root)
    app.router.add_get("/health", health_handler(ctx))
    if c.public_metrics:  # else on the admin listener only
        app.router.add_get("/metrics", metrics_handler(ctx))
    app.router.add_get(c.websocket_path, _websocket)
    if ctx.archive is not None:
        serve_archive(app, ctx.archive)
    return app


def _deny_archive(ctx: ServerContext) -> Middleware:
    """The archive refuses a client a deny rule names at once: 403 with the reason."""
    assert ctx.archive is not None
    path = ctx.archive.config.path

    @web.middleware
    async def deny(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == path:
            host = ctx.addresses.client(request.transport, request.headers).host
            rule = ctx.settings.rules.match(host)
            if isinstance(rule, Deny):
                ctx.metrics.denied_by_rule["archive"] += 1
                return web.Response(status=403, text=f"{rule.reason}\n")
        return await handler(request)

    return deny


def _site(ctx: ServerContext) -> Site:
    """What the page's config.json says: read per request, as the relay binds its port late."""
    relay = ctx.transit
    return Site(
        mailbox=ctx.config.websocket_path,
        transit=TRANSIT_PATH if relay is not None else None,
        transit_tcp_port=relay.port if relay is not None else None,
    )


def health_handler(ctx: ServerContext) -> Handler:
    async def health(request: web.Request) -> web.Response:
        problem = ctx.health.problem()
        if problem is not None:
            return web.Response(status=503, text=f"{problem}\n")
        return web.Response(text="ok\n")

    return health


def metrics_handler(ctx: ServerContext) -> Handler:
    exposition = Exposition(ctx)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=exposition.render(), content_type="text/plain", charset="utf-8")

    return metrics


async def _root(request: web.Request) -> web.Response:
    return web.Response(text="Wormhole Relay\n")


async def _websocket(request: web.Request) -> web.StreamResponse:
    # WebSocket handshakes never get here: the front door takes them (accept_websocket)
    return web.Response(text="Magic Wormhole mailbox: connect with a WebSocket client\n")
