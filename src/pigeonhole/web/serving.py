"""Serving the browser page: `/` to a browser, `/web/<name>` assets, `/web/config.json`.

The assets are built into `assets/` beside this module (`node web/build.mjs`, run by
scripts/setup) and read once at start; only files directly in that directory are served,
looked up by exact name, so no request path can reach anything else. Every answer carries
a strict Content-Security-Policy: the page runs only its own scripts (and the WebAssembly
they carry), talks only to its own origin, and cannot be framed. A request for `/` that
does not accept `text/html` (a load balancer's check, a CLI) gets `Wormhole Relay`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson
from aiohttp import web

log = logging.getLogger(__name__)

#: the built page, beside this module (gitignored; scripts/setup builds it)
ASSETS = Path(__file__).resolve().parent / "assets"
#: the page's URL prefix; the service worker's scope (streamed downloads live under it)
PREFIX = "/web/"
#: the AppID the CLIs use for text and files: the page speaks it to interoperate
APPID = "lothar.com/wormhole/text-or-file-xfer"
RELAY_TEXT = "Wormhole Relay\n"

#: 'wasm-unsafe-eval' lets the page's own scripts compile the WebAssembly they carry
#: (libsodium for transit records, hash-wasm for the file's SHA-256); it allows no
#: JavaScript eval. Without it the page falls back to plain-JS crypto (docs/web.md).
CSP = (
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
#: content types by suffix; a file of any other suffix is not served
TYPES: Mapping[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".webmanifest": "application/manifest+json",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@dataclass(frozen=True, slots=True)
class Site:
    """What config.json tells the page: paths on its own origin, and the TCP relay port."""

    mailbox: str
    transit: str | None
    transit_tcp_port: int | None

    def config_json(self) -> bytes:
        return orjson.dumps(
            {
                "appid": APPID,
                "mailbox": self.mailbox,
                "transit": self.transit,
                "transit_tcp_port": self.transit_tcp_port,
            }
        )


def load_assets(directory: Path = ASSETS) -> dict[str, Asset]:
    """The plain files directly in `directory` with a known suffix, by name ({}: not built).

    Nothing else is reachable: no subdirectory, no symbolic link, no hidden file."""
    found: dict[str, Asset] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.iterdir()):
        kind = TYPES.get(path.suffix)
        plain = path.is_file() and not path.is_symlink()
        if kind is None or not plain or not _NAME.fullmatch(path.name):
            continue
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        found[path.name] = Asset(body, kind, etag)
    return found


def accepts_html(accept: str) -> bool:
    """Whether an Accept header names text/html with a q above 0 (`*/*` alone does not)."""
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        if media.lower() != "text/html":
            continue
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


class WebPage:
    """The page's routes on an aiohttp app; `site` is read per request (ports bind late)."""

    def __init__(self, site: Callable[[], Site], assets: dict[str, Asset]) -> None:
        self._site = site
        self._assets = assets
        self.available = "index.html" in assets
        if self.available:
            log.info("browser page served at / (to browsers) and %s", PREFIX)
        else:
            log.warning(
                "web page not built (no %s/index.html): / answers %r; run scripts/setup",
                ASSETS,
                RELAY_TEXT.strip(),
            )

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/", self.root)
        app.router.add_get(PREFIX + "config.json", self.config)
        app.router.add_get(PREFIX + "{name}", self.asset)
        # what the service worker answers; reaching the server means it is not there
        app.router.add_get(PREFIX + "download/{id}", self.no_worker)

    async def root(self, request: web.Request) -> web.Response:
        vary = {"Vary": "Accept"}
        if self.available and accepts_html(request.headers.get("Accept", "")):
            return self._send(request, self._assets["index.html"], vary)
        return web.Response(text=RELAY_TEXT, headers=vary)

    async def asset(self, request: web.Request) -> web.Response:
        found = self._assets.get(request.match_info["name"])
        if found is None:
            return _not_found("no such file of the web page\n")
        return self._send(request, found, {})

    async def config(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self._site().config_json(), content_type="application/json", headers=HEADERS
        )

    async def no_worker(self, request: web.Request) -> web.Response:
        return _not_found(
            "this download is streamed by the page's service worker, which did not answer:"
            " start the transfer again from the page\n"
        )

    @staticmethod
    def _send(request: web.Request, asset: Asset, extra: Mapping[str, str]) -> web.Response:
        headers = {**HEADERS, **extra, "ETag": asset.etag}
        if request.headers.get("If-None-Match") == asset.etag:
            return web.Response(status=304, headers=headers)
        headers["Content-Type"] = asset.content_type
        return web.Response(body=asset.body, headers=headers)


def _not_found(text: str) -> web.Response:
    return web.Response(status=404, text=text, headers=HEADERS)
