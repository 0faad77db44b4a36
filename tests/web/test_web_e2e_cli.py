"""The page and the Python `wormhole` CLI, both ways, in headless Chromium against
`pigeonhole serve`: a 10 MiB file and a text each way. The CLI runs with `--no-listen` and
the page cannot open TCP, so the bytes can only cross our relay (the page through
WebSocket `/transit`, the CLI through TCP): its usage records must show the pair. The
page's transit worker must have sealed or opened every byte of the file (its test build
says what it carried, web/testing/transit-worker-probe.js).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.relay import ServedRelay, wait_for_happy
from tests.web.web_support import (
    MIB,
    ROUTED_FLAGS,
    Cli,
    WebPage,
    chromium,
    probe_transit_worker,
    random_file,
    random_text,
    sha256_file,
)

FILE_SIZE = 10 * MIB

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser(downloads_dir: Path, debug_port: int) -> Iterator[Any]:
    """Chromium that lets the worker's test build (a made-up response) reach loopback."""
    with chromium(downloads_dir, debug_port, ROUTED_FLAGS) as launched:
        yield launched


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser context whose pages run the transit worker's test build."""
    ctx = browser.new_context(accept_downloads=True)
    probe_transit_worker(ctx)
    try:
        yield ctx
    finally:
        ctx.close()


def test_web_e2e_page_sends_file_to_cli(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, tmp_path: Path
) -> None:
    source = random_file(tmp_path / "source", FILE_SIZE)
    since = len(web_server.records())
    code = web_page.send_file(source)
    receiver = cli.receive(code, file=True)
    receiver.check()
    web_page.wait_state("done", timeout=30)
    assert sha256_file(receiver.received) == sha256_file(source)
    # the file's records were sealed in the page's transit worker, not on its main thread,
    # by libsodium's WebAssembly (the page's CSP lets it start)
    assert web_page.transit_carried() == {"sent": FILE_SIZE, "received": 0}
    assert web_page.transit_box() == "libsodium"
    wait_for_happy(web_server.records, since, FILE_SIZE)


def test_web_e2e_page_sends_text_to_cli(web_page: WebPage, cli: Cli) -> None:
    text = random_text()
    code = web_page.send_text(text)
    receiver = cli.receive(code, file=False)
    receiver.check()
    assert text in receiver.output.splitlines(), receiver.describe()
    web_page.wait_state("done", timeout=30)


def test_web_e2e_cli_sends_file_to_page(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, tmp_path: Path
) -> None:
    source = random_file(tmp_path / "source", FILE_SIZE, name="ten-mebibytes.bin")
    since = len(web_server.records())
    sender = cli.send(str(source))
    got = web_page.receive_file(sender.wait_code(), tmp_path / "got")
    sender.check()
    assert got.name == source.name
    assert got.stat().st_size == FILE_SIZE
    assert sha256_file(got) == sha256_file(source)
    # opened in the worker: the file, and the page's ack record sealed there
    carried = web_page.transit_carried()
    assert carried["received"] == FILE_SIZE
    assert 0 < carried["sent"] < 200
    assert web_page.transit_box() == "libsodium"
    wait_for_happy(web_server.records, since, FILE_SIZE)


def test_web_e2e_cli_sends_text_to_page(web_page: WebPage, cli: Cli) -> None:
    text = random_text()
    sender = cli.send("--text", text)
    shown = web_page.receive_text(sender.wait_code())
    sender.check()
    assert shown.strip() == text
