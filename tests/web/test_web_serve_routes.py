"""`pigeonhole serve` serving the browser page, as a real process on loopback: `/` by the
request's Accept header (a browser gets the page, anything else `Wormhole Relay`), the
assets and config.json under /web/ with the Content-Security-Policy and the other headers,
404s for everything else (path tricks included), `--no-web` and `--no-transit`."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pigeonhole.web.serving import APPID, ASSETS, CSP
from tests.support.process import ServeProcess, free_port

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
ASSET_TYPES = {
    "app.js": "text/javascript; charset=utf-8",
    "sw.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "index.html": "text/html; charset=utf-8",
}


def get(
    port: int, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """GET `path` exactly as given (no normalisation of `..` or escapes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def serve(tmp_path: Path, name: str, *args: str) -> ServeProcess:
    return ServeProcess(
        tmp_path / f"{name}.log",
        "--data-dir",
        str(tmp_path / name),
        "--admin-port",
        "0",
        *args,
    )


@pytest.fixture(scope="module")
def transit_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, transit_port: int) -> Iterator[ServeProcess]:
    with serve(
        tmp_path_factory.mktemp("web-serve"), "on", "--transit-port", str(transit_port)
    ) as running:
        yield running


def test_web_serve_the_page_is_built_by_setup() -> None:
    """scripts/setup ran web/build.mjs: the four files the page needs are there."""
    for name in ASSET_TYPES:
        assert (ASSETS / name).is_file(), f"{ASSETS / name} missing: run scripts/setup"
    assert (ASSETS / "app.js").stat().st_size > 10_000  # the bundled core and noble


@pytest.mark.parametrize(
    "accept",
    [None, "*/*", "application/json", "text/plain", "text/html;q=0", "text/htmlx"],
)
def test_web_serve_root_answers_wormhole_relay_to_non_browsers(
    server: ServeProcess, accept: str | None
) -> None:
    status, headers, body = get(server.port, "/", {"Accept": accept} if accept else {})
    assert (status, body) == (200, b"Wormhole Relay\n")
    assert headers["Vary"] == "Accept"


@pytest.mark.parametrize("accept", [BROWSER_ACCEPT, "text/html", "TEXT/HTML; q=0.5"])
def test_web_serve_root_answers_the_page_to_a_browser(server: ServeProcess, accept: str) -> None:
    status, headers, body = get(server.port, "/", {"Accept": accept})
    assert status == 200
    assert body == (ASSETS / "index.html").read_bytes()
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Vary"] == "Accept"
    for name, value in HEADERS.items():
        assert headers[name] == value


@pytest.mark.parametrize("name", sorted(ASSET_TYPES))
def test_web_serve_assets_carry_the_csp_and_their_type(server: ServeProcess, name: str) -> None:
    status, headers, body = get(server.port, f"/web/{name}")
    assert status == 200
    assert body == (ASSETS / name).read_bytes()
    assert headers["Content-Type"] == ASSET_TYPES[name]
    for header, value in HEADERS.items():
        assert headers[header] == value
    # revalidated (no-cache), and a known copy costs no body
    again, _, empty = get(server.port, f"/web/{name}", {"If-None-Match": headers["ETag"]})
    assert (again, empty) == (304, b"")
    stale, _, full = get(server.port, f"/web/{name}", {"If-None-Match": '"0"'})
    assert (stale, full) == (200, body)


def test_web_serve_the_csp_is_the_contracts() -> None:
    """No inline code, no other origin, no framing: what docs/web.md promises."""
    rules = dict(rule.strip().split(" ", 1) for rule in CSP.split(";"))
    assert rules["default-src"] == "'none'"
    # the page's own scripts, and WebAssembly compiled by them (the transit worker's
    # libsodium, the file's SHA-256); no JavaScript eval, no inline code
    assert rules["script-src"] == "'self' 'wasm-unsafe-eval'"
    assert rules["style-src"] == "'self'"
    assert rules["connect-src"] == "'self'"
    assert rules["frame-ancestors"] == "'none'"
    sources = CSP.replace(";", " ").split()
    assert "'unsafe-eval'" not in sources
    assert "'unsafe-inline'" not in sources


def test_web_serve_config_json(server: ServeProcess, transit_port: int) -> None:
    status, headers, body = get(server.port, "/web/config.json")
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert headers["Content-Security-Policy"] == CSP
    assert json.loads(body) == {
        "appid": APPID,
        "mailbox": "/v1",
        "transit": "/transit",
        "transit_tcp_port": transit_port,
    }


def test_web_serve_config_json_without_transit(tmp_path: Path) -> None:
    with serve(tmp_path, "no-transit", "--no-transit") as running:
        status, _, body = get(running.port, "/web/config.json")
        assert status == 200
        assert json.loads(body) == {
            "appid": APPID,
            "mailbox": "/v1",
            "transit": None,
            "transit_tcp_port": None,
        }


@pytest.mark.parametrize(
    "path",
    [
        "/web/",
        "/web/nothing.js",
        "/web/serving.py",  # beside assets/, not in it
        "/web/__init__.py",
        "/web/../pyproject.toml",
        "/web/../web/serving.py",
        "/web/%2e%2e/serving.py",
        "/web/..%2fserving.py",
        "/web/%2e%2e%2f%2e%2e%2fconfig.py",
        "/web/assets/app.js",
        "/web/.",
        "/web/..",
        "/web//etc/passwd",
        "/web/%2fetc%2fpasswd",
        "/web/app.js/",
        "/web/download/0f8fad5b-d9cb-469f-a165-70867728950e",
        "/index.html",
        "/app.js",
    ],
)
def test_web_serve_nothing_outside_the_assets_is_served(server: ServeProcess, path: str) -> None:
    status, _, body = get(server.port, path, {"Accept": BROWSER_ACCEPT})
    assert status == 404, (path, body[:200])
    assert b"import " not in body and b"<html" not in body


def test_web_serve_a_download_the_worker_missed_says_what_to_do(server: ServeProcess) -> None:
    status, headers, body = get(server.port, "/web/download/abc")
    assert status == 404
    assert headers["Content-Security-Policy"] == CSP
    assert b"service worker" in body and b"start the transfer again" in body


def test_web_serve_no_web_answers_wormhole_relay_to_browsers_too(tmp_path: Path) -> None:
    with serve(tmp_path, "no-web", "--no-web") as running:
        status, headers, body = get(running.port, "/", {"Accept": BROWSER_ACCEPT})
        assert (status, body) == (200, b"Wormhole Relay\n")
        assert "Content-Security-Policy" not in headers
        for path in ("/web/app.js", "/web/index.html", "/web/config.json", "/web/sw.js"):
            assert get(running.port, path)[0] == 404, path
        # the rest of the server is there
        assert get(running.port, "/health")[0] == 200
