"""Transfers between two pages in real headless Chromium (Debian's, through Playwright)
against `pigeonhole serve`, for what the page itself does: decline, the progress figures, a
download cancelled in the browser, an empty file, no service worker (the file in memory,
said so), https with wss:// only, and hashcash minted when the server requires it.
With the CLIs: test_web_e2e_*."""

from __future__ import annotations

import re
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.support.process import PIGEONHOLE, ServeProcess, Service, free_port
from tests.web.web_page_support import Watched, open_page, send_file_between, serve_page

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_page(tmp_path_factory.mktemp("web-page-transfers")) as running:
        yield running


def test_web_page_decline_and_progress_between_two_pages(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    """A declined file leaves both pages failed, saying so; an accepted one shows bytes,
    MiB/s and the time left, on both sides."""
    source = tmp_path / "figures.bin"
    source.write_bytes(bytes(range(256)) * 4096 * 6)  # 6 MiB
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server)
    try:
        sender.by_id("send-file").set_input_files(str(source))
        sender.by_id("send-button").click()
        code = sender.code()
        receiver.by_id("receive-code").fill(code)
        receiver.by_id("receive-button").click()
        receiver.by_id("accept-button").wait_for(state="visible")
        offer = receiver.page.locator("#offer-text").inner_text()
        assert "figures.bin" in offer and "6.0 MiB" in offer
        # one offer line (no status line repeating it), answered by Accept or Decline only
        assert not receiver.page.locator("#status").is_visible()
        assert not receiver.page.get_by_role("button", name="Cancel").is_visible()
        assert receiver.page.evaluate("document.activeElement.dataset.testid") == "accept-button"
        receiver.page.get_by_role("button", name="Decline").click()
        receiver.wait_state("failed")
        sender.wait_state("failed")
        assert "declin" in receiver.status().lower()
        assert "declin" in sender.status().lower() or "reject" in sender.status().lower()

        sender.page.get_by_role("button", name="Start over").click()
        saved = tmp_path / "saved.bin"
        send_file_between(sender, receiver, source, saved)
        assert saved.read_bytes() == source.read_bytes()
        for tab in (sender, receiver):
            figures = tab.page.locator("#progress-text").inner_text()
            assert re.fullmatch(r"6\.0 MiB of 6\.0 MiB · \d+\.\d MiB/s · .+ left", figures), figures
            assert tab.page.locator("#progress").evaluate("p => p.value === p.max")
        assert "in your downloads" in receiver.status()
        # nothing said while it was saving is left under the "received" line
        assert not receiver.page.locator("#offer").is_visible()
        assert not receiver.page.locator("#notice").is_visible()
        assert "Saving" not in receiver.page.locator("#transfer").inner_text()
        assert sender.clean() == [] and receiver.clean() == []
    finally:
        sending.close()
        receiving.close()


def test_web_page_without_a_service_worker_keeps_the_file_in_memory_and_says_so(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    source = tmp_path / "small.bin"
    source.write_bytes(bytes(range(256)) * 1024)
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server, service_workers="block")
    try:
        send_file_between(sender, receiver, source, tmp_path / "saved.bin")
        assert (tmp_path / "saved.bin").read_bytes() == source.read_bytes()
        notice = receiver.page.locator("#notice").inner_text()
        assert "held in memory" in notice and "service worker" in notice, notice
        blocked = "console warning: Service Worker registration blocked by Playwright"
        assert sender.clean() == [] and [p for p in receiver.clean() if p != blocked] == []
    finally:
        sending.close()
        receiving.close()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`pigeonhole serve --tls-cert`: the page at https://, the mailbox at wss://."""
    where = tmp_path_factory.mktemp("web-tls")
    cert = trustme.CA().issue_cert("127.0.0.1")
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    port = free_port()
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE

    direct = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=unverified)
    )

    def answers() -> bool:
        try:
            with direct.open(f"https://127.0.0.1:{port}/", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    argv = [*PIGEONHOLE, "serve", "--port", str(port), "--data-dir", str(where / "data")]
    argv += ["--admin-port", "0", "--transit-port", "0"]
    argv += ["--tls-cert", str(cert_path), "--tls-key", str(key_path)]
    with Service(argv, where / "serve.log", answers) as running:
        running.port = port  # type: ignore[attr-defined]
        yield running


def test_web_page_over_https_uses_wss(browser: Any, tls_server: Service, tmp_path: Path) -> None:
    """Served with TLS, the page reaches the mailbox and the relay by wss:// only."""
    url = f"https://127.0.0.1:{tls_server.port}"  # type: ignore[attr-defined]
    contexts, tabs, sockets = [], [], []
    for _ in range(2):
        context = browser.new_context(accept_downloads=True, ignore_https_errors=True)
        contexts.append(context)
        tab = Watched(context, url)
        tab.page.on("websocket", lambda ws: sockets.append(ws.url))
        tabs.append(tab)
    sender, receiver = tabs
    try:
        sender.by_id("send-text").fill("over tls")
        sender.by_id("send-button").click()
        receiver.by_id("receive-code").fill(sender.code())
        receiver.by_id("receive-button").click()
        receiver.wait_state("done")
        assert receiver.by_id("received-text").inner_text() == "over tls"
        source = tmp_path / "tls.bin"
        source.write_bytes(bytes(range(256)) * 2048)
        sender.page.get_by_role("button", name="Start over").click()
        send_file_between(sender, receiver, source, tmp_path / "saved.bin")
        assert (tmp_path / "saved.bin").read_bytes() == source.read_bytes()
        port = tls_server.port  # type: ignore[attr-defined]
        assert f"wss://127.0.0.1:{port}/v1" in sockets
        assert f"wss://127.0.0.1:{port}/transit" in sockets
        assert all(s.startswith("wss://") for s in sockets), sockets
    finally:
        for context in contexts:
            context.close()


def test_web_page_mints_hashcash_when_the_server_requires_it(browser: Any, tmp_path: Path) -> None:
    """A server that offers only hashcash: both pages mint their stamps and exchange a text."""
    hashcash = ("--permissions", "hashcash", "--hashcash-bits", "16", "--public-metrics")
    with serve_page(tmp_path, *hashcash) as server:
        sending, sender = open_page(browser, server)
        receiving, receiver = open_page(browser, server)
        try:
            sender.by_id("send-text").fill("paid for")
            sender.by_id("send-button").click()
            receiver.by_id("receive-code").fill(sender.code())
            receiver.by_id("receive-button").click()
            receiver.wait_state("done")
            sender.wait_state("done")
            assert receiver.by_id("received-text").inner_text() == "paid for"
            assert sender.clean() == [] and receiver.clean() == []
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with direct.open(f"http://127.0.0.1:{server.port}/metrics") as answer:
                metrics = answer.read().decode()
            # both pages' stamps were checked and granted; none refused
            assert re.search(r'permission_outcomes_total\{outcome="granted"\} [2-9]', metrics)
            assert 'outcome="refused"} 0' in metrics or 'outcome="refused"' not in metrics
        finally:
            sending.close()
            receiving.close()


def test_web_page_a_download_cancelled_in_the_browser_stops_both_pages(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    """The person cancels the download (the browser's own control): the worker's stream is
    cancelled, the receiving page stops and says so, and the sending page is told."""
    source = tmp_path / "big.bin"
    with open(source, "wb") as f:
        for _ in range(64):
            f.write(bytes(range(256)) * 4096)  # 64 MiB in all
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server)
    try:
        sender.by_id("send-file").set_input_files(str(source))
        sender.by_id("send-button").click()
        receiver.by_id("receive-code").fill(sender.code())
        receiver.by_id("receive-button").click()
        with receiver.page.expect_download() as download:
            receiver.by_id("accept-button").click()
        download.value.cancel()
        receiver.wait_state("failed")
        sender.wait_state("failed")
        assert "cancelled in the browser" in receiver.status(), receiver.status()
        assert sender.status(), "the sender failed without a message"
        assert "Start over" in receiver.page.locator("#reset-button").inner_text()
    finally:
        sending.close()
        receiving.close()


def test_web_page_an_empty_file_arrives_empty(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    source = tmp_path / "empty.txt"
    source.write_bytes(b"")
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server)
    try:
        send_file_between(sender, receiver, source, tmp_path / "saved.txt")
        assert (tmp_path / "saved.txt").read_bytes() == b""
        assert "empty.txt (0 B) received" in receiver.status()
        assert sender.clean() == [] and receiver.clean() == []
    finally:
        sending.close()
        receiving.close()
