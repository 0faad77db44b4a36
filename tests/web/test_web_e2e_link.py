"""The code as a link and a QR code, in headless Chromium against `pigeonhole serve`: the
sending page shows `BASE/#CODE` (`code-link`) and a QR code of it (`code-qr`, decoded here
by zbar from the browser's own rendering); the link opened in a second page receives at
once (a text is shown; a file from the CLI waits for Accept) and leaves no fragment in the
address bar; a link with a malformed code says so and starts nothing.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.web.web_support import Cli, WebPage, random_file, random_text, sha256_file

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def decode_qr(element: Any) -> list[str]:
    """What zbar reads in a screenshot of `element` (a Playwright locator)."""
    image = pytest.importorskip("PIL.Image", reason="Pillow comes with the pipeline extra")
    try:
        from pyzbar import pyzbar  # type: ignore[import-untyped]
    except ImportError as exc:  # the module, or Debian's libzbar0 under it
        pytest.skip(f"pyzbar cannot load zbar (Debian package libzbar0): {exc}")
    shot = image.open(io.BytesIO(element.screenshot())).convert("L")
    return [symbol.data.decode() for symbol in pyzbar.decode(shot)]


def open_link(context: Any, link: str, base_url: str) -> WebPage:
    """A new tab opened at `link` (as a person who follows it would)."""
    page = context.new_page()
    page.goto(link)
    web = WebPage(page, base_url)
    web.by_id("transfer").wait_for(state="attached")
    return web


def test_web_e2e_link_and_qr_receive_a_text(web_page: WebPage, browser: Any, base_url: str) -> None:
    text = random_text()
    code = web_page.send_text(text)
    link = web_page.by_id("code-link")
    href = str(link.get_attribute("href"))
    assert href == f"{base_url}/#{code}"
    assert link.inner_text().strip() == href
    qr = web_page.by_id("code-qr")
    assert qr.evaluate("e => e.tagName.toLowerCase()") == "svg"
    assert decode_qr(qr) == [href]
    # the receiver opens the link in a browser of its own: the text comes at once
    other = browser.new_context()
    try:
        receiver = open_link(other, href, base_url)
        receiver.wait_state("done", timeout=60)
        assert receiver.by_id("received-text").inner_text().strip() == text
        assert receiver.page.url == f"{base_url}/", "the code stayed in the address bar"
        assert receiver.page.evaluate("location.hash") == ""
        web_page.wait_state("done", timeout=30)
    finally:
        other.close()


def test_web_e2e_link_waits_for_accept_of_a_file(
    context: Any, cli: Cli, base_url: str, tmp_path: Path
) -> None:
    source = random_file(tmp_path / "source", 100_000, name="from the link.bin")
    sender = cli.send(str(source))
    code = sender.wait_code()
    receiver = open_link(context, f"{base_url}/#{code}", base_url)
    download = receiver.accept_offer()  # the offer waited: nothing saved before Accept
    receiver.wait_state("done", timeout=60)
    sender.check()
    got = tmp_path / "got" / download.suggested_filename
    download.save_as(str(got))
    assert got.name == source.name
    assert sha256_file(got) == sha256_file(source)
    assert receiver.page.evaluate("location.hash") == ""


MALFORMED = ["not-a-code", "7", "%E2%9C%93-%zz", "12-two%20words%3Cb%3E" + "x" * 300]


@pytest.mark.parametrize("fragment", MALFORMED)
def test_web_e2e_link_with_a_malformed_code(context: Any, base_url: str, fragment: str) -> None:
    page = open_link(context, f"{base_url}/#{fragment}", base_url)
    page.wait_state("failed", timeout=10)
    assert "is not a wormhole code" in page.message()
    assert page.page.evaluate("location.hash") == ""
    # nothing was started: the page can receive and send as usual
    assert page.by_id("receive-button").is_enabled()
    assert page.by_id("send-button").is_enabled()
