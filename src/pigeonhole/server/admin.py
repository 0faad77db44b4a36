"""The admin listener's aiohttp app: /status, /status.json, /metrics and /health.

A plain aiohttp site on its own host and port (`--admin-host`, `--admin-port`), apart
from the public listener, which keeps `/`, `/v1`, the archive and `/health`
(docs/status.md). The page is one self-contained file (server/static/status.html: no
build step, nothing fetched from elsewhere); its script reads /status.json every
`--status-refresh` seconds.
"""

from __future__ import annotations

import logging
from importlib import resources

import orjson
from aiohttp import web

from pigeonhole.server.bad_input import http_logger
from pigeonhole.server.context import ServerContext
from pigeonhole.server.routes import Handler, health_handler, metrics_handler
from pigeonhole.server.status import StatusRings, status_json

log = logging.getLogger("pigeonhole.server")

#: the page may run only its own inline script and style, and fetch only from its origin
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def status_page() -> bytes:
    """The page's bytes (package data)."""
    return resources.files("pigeonhole.server").joinpath("static/status.html").read_bytes()


def make_admin_app(
    server: ServerContext, rings: StatusRings, health: Handler, metrics: Handler
) -> web.Application:
    page = status_page()

    async def status(request: web.Request) -> web.Response:
        return web.Response(
            body=page, content_type="text/html", charset="utf-8", headers=PAGE_HEADERS
        )

    async def status_data(request: web.Request) -> web.Response:
        body = orjson.dumps(status_json(server, rings))
        return web.Response(
            body=body,
            content_type="application/json",
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )

    async def root(request: web.Request) -> web.Response:
        raise web.HTTPFound("/status")

    app = web.Application()
    app.router.add_get("/", root)
    app.router.add_get("/status", status)
    app.router.add_get("/status.json", status_data)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    return app


async def open_admin_listener(
    server: ServerContext, rings: StatusRings
) -> tuple[web.AppRunner, int]:
    """Serve the admin app on its own host and port: its runner, and the bound port."""
    c = server.config
    app = make_admin_app(server, rings, health_handler(server), metrics_handler(server))
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        logger=http_logger(server.events.bad_input, "admin"),
    )
    await runner.setup()
    site = web.TCPSite(runner, c.admin_host, c.admin_port, reuse_address=True)
    try:
        await site.start()
    except OSError as err:
        log.error(
            "cannot open the admin listener on %s port %d: %s (--admin-host, --admin-port;"
            " --no-admin for none)",
            c.admin_host,
            c.admin_port,
            err.strerror or err,
        )
        await runner.cleanup()
        raise
    port: int = runner.addresses[0][1]
    host = f"[{c.admin_host}]" if ":" in c.admin_host else c.admin_host
    log.info("admin listener (status page, metrics) on http://%s:%d/status", host, port)
    return runner, port
