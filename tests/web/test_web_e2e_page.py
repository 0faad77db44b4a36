"""Page to page (two browser contexts: two people, each with their own service worker and
storage; the server's usage counts their exchanges like any other), and a wrong code on
either side of a page <-> CLI pair: both sides say so, the page shows `failed` and a
message, and no byte of the file crosses the relay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.relay import ServedRelay, wait_for_happy
from tests.support.wormhole_clients import Codes
from tests.web.web_support import (
    CLI_MISMATCH,
    MIB,
    Cli,
    WebPage,
    finished_mailboxes,
    random_file,
    random_text,
    sha256_file,
    wait_for_mailboxes,
)

FILE_SIZE = 10 * MIB
SMALL = 256 * 1024

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_web_e2e_page_to_page(
    browser: Any, base_url: str, web_server: ServedRelay, tmp_path: Path
) -> None:
    sending_ctx = browser.new_context(accept_downloads=True)
    receiving_ctx = browser.new_context(accept_downloads=True)
    try:
        # a text first, then a file, each between fresh tabs
        sender = WebPage.open(sending_ctx, base_url)
        receiver = WebPage.open(receiving_ctx, base_url)
        mailboxes = finished_mailboxes(web_server.usage_db)
        text = random_text()
        code = sender.send_text(text)
        assert receiver.receive_text(code).strip() == text
        sender.wait_state("done", timeout=30)

        source = random_file(tmp_path / "source", FILE_SIZE, name="page-to-page.bin")
        since = len(web_server.records())
        sender = WebPage.open(sending_ctx, base_url)
        receiver = WebPage.open(receiving_ctx, base_url)
        code = sender.send_file(source)
        got = receiver.receive_file(code, tmp_path / "got")
        sender.wait_state("done", timeout=30)
        assert got.name == source.name
        assert sha256_file(got) == sha256_file(source)
        wait_for_happy(web_server.records, since, FILE_SIZE)
        wait_for_mailboxes(web_server.usage_db, mailboxes + 2)  # the text's and the file's
    finally:
        sending_ctx.close()
        receiving_ctx.close()


def wrong(code: str) -> str:
    """The same nameplate with other words from the PGP list."""
    nameplate, words = code.split("-", 1)
    other = words
    while other == words:
        other = Codes().words()
    return f"{nameplate}-{other}"


def assert_page_failed(page: WebPage) -> str:
    """The page reached `failed` and says something; what it says."""
    page.wait_state("failed", timeout=30)
    said = page.message()
    assert said, "the page failed without a message"
    return said


def assert_no_bytes_relayed(web_server: ServedRelay, since: int, scary: int) -> None:
    """Once the server has recorded the pair's mailbox as `scary` (both sides have closed
    it: neither goes on to the relay), no relay record since `since` carried a byte."""
    wait_for_mailboxes(web_server.usage_db, scary + 1, timeout=30, result="scary")
    moved = [r for r in web_server.records()[since:] if r["total_bytes"]]
    assert not moved, f"bytes crossed the relay after a wrong code: {moved}"


def test_web_e2e_wrong_code_page_sends(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, tmp_path: Path
) -> None:
    """The page sends, the CLI types the right nameplate with the wrong words."""
    source = random_file(tmp_path / "source", SMALL)
    since = len(web_server.records())
    scary = finished_mailboxes(web_server.usage_db, "scary")
    code = web_page.send_file(source)
    receiver = cli.receive(wrong(code), file=True)
    assert receiver.wait(60) != 0, receiver.describe()
    assert CLI_MISMATCH.search(receiver.output), receiver.describe()
    said = assert_page_failed(web_page)
    assert "code" in said.lower(), said
    assert not receiver.received.exists()
    assert_no_bytes_relayed(web_server, since, scary)


def test_web_e2e_wrong_code_page_receives(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, downloads_dir: Path, tmp_path: Path
) -> None:
    """The CLI sends a file, the page types the right nameplate with the wrong words."""
    source = random_file(tmp_path / "source", SMALL, name="never-arrives.bin")
    since = len(web_server.records())
    scary = finished_mailboxes(web_server.usage_db, "scary")
    sender = cli.send(str(source))
    downloads = set(downloads_dir.iterdir())
    web_page.enter_code(wrong(sender.wait_code()))
    said = assert_page_failed(web_page)
    assert "code" in said.lower(), said
    assert not web_page.by_id("accept-button").is_visible()
    assert sender.wait(60) != 0, sender.describe()
    assert CLI_MISMATCH.search(sender.output), sender.describe()
    assert set(downloads_dir.iterdir()) == downloads, "a download started"
    assert_no_bytes_relayed(web_server, since, scary)
