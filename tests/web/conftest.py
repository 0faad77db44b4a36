"""Fixtures of the page's end-to-end tests: one `pigeonhole serve` with its relay (usage
records readable), one headless Debian Chromium, a fresh browser context per test, the
`wormhole` CLI, and a network namespace for wormhole-william's sender (which always dials
transit.magic-wormhole.io:4001: there that name reaches our relay).

The namespaces, forwarders and the served relay are tests/support's (shared with tests/interop).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.support.process as process_support
from tests.support.netns import Forwarder, Net, NetNS
from tests.support.relay import ServedRelay
from tests.web.web_support import Cli, WebPage, chromium


@pytest.fixture(scope="session")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRelay]:
    """`pigeonhole serve` on free ports (public, TCP relay, admin): the page at `/`, the
    mailbox at /v1, the relay at /transit and on `.port`; `.records()` its relay usage."""
    running = ServedRelay(tmp_path_factory.mktemp("web-serve"))
    try:
        yield running
    finally:
        status = running.stop()
        assert status == 0, f"the server exited with {status}:\n{running.log_text()}"


@pytest.fixture(scope="session")
def base_url(web_server: ServedRelay) -> str:
    return f"http://127.0.0.1:{web_server.server.port}"


@pytest.fixture(scope="session")
def debug_port() -> int:
    """Chromium's DevTools port, for the heap probe (Playwright itself uses a pipe)."""
    return process_support.free_port()


@pytest.fixture(scope="session")
def downloads_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web-downloads")


#: per module, not per session: while Playwright's sync API runs, this thread has a
#: running event loop, which the asyncio tests of other folders cannot share
@pytest.fixture(scope="module")
def browser(downloads_dir: Path, debug_port: int) -> Iterator[Any]:
    with chromium(downloads_dir, debug_port) as launched:
        yield launched


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser context (its own service workers, storage and downloads)."""
    ctx = browser.new_context(accept_downloads=True)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def web_page(context: Any, base_url: str) -> WebPage:
    return WebPage.open(context, base_url)


@pytest.fixture
def cli(web_server: ServedRelay, tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(web_server.server.url, web_server.port, tmp_path / "cli")
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="session")
def ww_net(web_server: ServedRelay, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    """A private namespace whose transit.magic-wormhole.io:4001 is our relay and whose
    127.0.0.1:PORT is our mailbox (tests/interop/README.md, "How file transfers stay on
    loopback"): where a wormhole-william sender can reach the page's relay."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("unshare/nsenter (util-linux) not found: no namespace for wormhole-william")
    forwarder = Forwarder()
    try:
        netns = NetNS(tmp_path_factory.mktemp("web-ww-ns"))
    except OSError as exc:
        forwarder.close()
        pytest.skip(f"cannot create a network namespace: {exc}")
    try:
        yield Net(web_server, forwarder, netns)
    finally:
        netns.close()
        forwarder.close()
