"""The web page's files as the server reads them (pigeonhole/web/serving.py): only plain
files directly in the assets directory, a page with no inline code for the CSP to allow,
the Accept rule, and a server whose page is not built still answering `/`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from aiohttp import web

from pigeonhole.web.serving import ASSETS, Site, WebPage, accepts_html, load_assets
from tests.web.web_support import TESTIDS


class Markup(HTMLParser):
    """What in a page a Content-Security-Policy without 'unsafe-inline' would refuse."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        for key, _ in attrs:
            if key.startswith("on") or key == "style":
                self.inline.append(f"<{tag} {key}>")
        if tag == "style":
            self.inline.append("<style>")
        if tag == "script":
            self._in_script = True
            if named.get("src"):
                self.scripts.append(str(named["src"]))
        if tag == "link" and named.get("rel") == "stylesheet":
            self.styles.append(str(named.get("href")))
        for key in ("href", "src", "action"):
            value = named.get(key) or ""
            if re.match(r"(?i)\s*(javascript:|https?:|//)", value):
                self.inline.append(f"<{tag} {key}={value}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append("<script> with code")


def test_web_serve_index_has_no_inline_code_and_only_own_files() -> None:
    markup = Markup()
    markup.feed((ASSETS / "index.html").read_text())
    assert markup.inline == []
    assert markup.scripts == ["/web/app.js"]
    assert markup.styles == ["/web/style.css"]


def test_web_serve_index_has_the_automation_contract() -> None:
    page = (ASSETS / "index.html").read_text()
    for testid in TESTIDS:
        assert f'data-testid="{testid}"' in page, testid
    assert re.search(r'data-testid="transfer"[^>]*data-state="idle"', page, re.S)


def test_web_serve_only_plain_files_directly_in_the_directory_load(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html>")
    (tmp_path / "app.js").write_text("1")
    (tmp_path / ".hidden.js").write_text("secret")
    (tmp_path / "notes.txt").write_text("unknown suffix")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.js").write_text("nested")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.js"
    outside.write_text("outside")
    (tmp_path / "link.js").symlink_to(outside)
    loaded = load_assets(tmp_path)
    assert sorted(loaded) == ["app.js", "index.html"]
    assert loaded["app.js"].body == b"1"
    assert loaded["app.js"].content_type == "text/javascript; charset=utf-8"
    assert load_assets(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        ("text/html", True),
        ("text/html,application/xhtml+xml,*/*;q=0.8", True),
        ("application/json, text/html;q=0.1", True),
        ("Text/HTML", True),
        ("text/html;q=0", False),
        ("text/html;q=0.0", False),
        ("text/html;q=x", False),
        ("*/*", False),
        ("text/*", False),
        ("", False),
        ("text/htm", False),
    ],
)
def test_web_serve_accepts_html(accept: str, html: bool) -> None:
    assert accepts_html(accept) is html


@contextlib.contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """`app` on a loopback port, served by a loop in a thread of its own (the suite's
    Playwright tests hold the main thread's loop); its base URL."""
    ready: queue.Queue[int] = queue.Queue()
    stopping: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def run() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        stop = asyncio.Event()
        stopping.append((asyncio.get_running_loop(), stop))
        ready.put(runner.addresses[0][1])
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    port = ready.get(timeout=10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop, stop = stopping[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def status_and_text(url: str, accept: str = "text/html") -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_web_serve_an_unbuilt_page_still_answers_root(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`Wormhole Relay` to browsers too, and one line in the log (not one per request)."""
    caplog.set_level(logging.WARNING, logger="pigeonhole.web.serving")
    app = web.Application()
    WebPage(lambda: Site("/v1", "/transit", 4001), load_assets(tmp_path / "none")).add_routes(app)
    with serving(app) as url:
        for _ in range(3):
            assert status_and_text(url + "/") == (200, "Wormhole Relay\n")
        assert status_and_text(url + "/web/app.js")[0] == 404
    warnings = [r for r in caplog.records if r.name == "pigeonhole.web.serving"]
    assert len(warnings) == 1
    assert "scripts/setup" in warnings[0].getMessage()
