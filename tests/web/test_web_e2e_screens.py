"""The page as people see it, page to page: on a desktop and at 390 px wide nothing
overflows sideways and the console shows no error, at each step (a code allocated, a
file offered, the file received, a folder picked and its code given). Screenshots of the
steps are taken at desktop width; PIGEONHOLE_UPDATE_SCREENSHOT=1 keeps them as
docs/web-send.png (the code, its link and QR code), docs/web-receive.png, docs/web-done.png
and docs/web-folder.png (docs/web.md shows them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.web.web_support import MIB, WebPage, random_file, sha256_file

DOCS = Path(__file__).resolve().parents[2] / "docs"
DESKTOP = {"width": 1000, "height": 860}
PHONE = {"width": 390, "height": 844}

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def watch_console(page: WebPage, errors: list[str]) -> None:
    page.page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.page.on("pageerror", lambda e: errors.append(str(e)))


def check_layout(page: WebPage, step: str, width: int, shots: Path) -> None:
    """At `width`, the page is no wider than the viewport, at this step; a screenshot of it
    is kept in `shots` (the test's directory), to look at."""
    page.page.set_viewport_size({**PHONE, "width": width} if width < 500 else DESKTOP)
    wide = page.page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width, f"{step}: the page is {wide} px wide at {width} px"
    page.page.screenshot(path=str(shots / f"{step.replace(' ', '-')}-{width}.png"), full_page=True)


def shoot(page: WebPage, name: str, tmp_path: Path) -> None:
    page.page.set_viewport_size(DESKTOP)
    shot = tmp_path / name
    page.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000, f"{name} looks empty"
    if os.environ.get("PIGEONHOLE_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, DOCS / name)


def test_web_e2e_screens(browser: Any, base_url: str, tmp_path: Path) -> None:
    errors: list[str] = []
    sending_ctx = browser.new_context(accept_downloads=True, viewport=DESKTOP)
    receiving_ctx = browser.new_context(accept_downloads=True, viewport=DESKTOP)
    try:
        sender = WebPage.open(sending_ctx, base_url)
        receiver = WebPage.open(receiving_ctx, base_url)
        for page in (sender, receiver):
            watch_console(page, errors)
            check_layout(page, "idle", PHONE["width"], tmp_path)
            check_layout(page, "idle", DESKTOP["width"], tmp_path)
        source = random_file(tmp_path / "source", 3 * MIB, name="holiday-photos.zip")

        code = sender.send_file(source)
        check_layout(sender, "code shown", PHONE["width"], tmp_path)
        shoot(sender, "web-send.png", tmp_path)

        receiver.by_id("receive-code").fill(code)
        receiver.by_id("receive-button").click()
        receiver.by_id("accept-button").wait_for(state="visible", timeout=30_000)
        check_layout(receiver, "offer shown", PHONE["width"], tmp_path)
        shoot(receiver, "web-receive.png", tmp_path)

        with receiver.page.expect_download() as info:
            receiver.by_id("accept-button").click()
        receiver.wait_state("done", timeout=60)
        sender.wait_state("done", timeout=30)
        check_layout(receiver, "done", PHONE["width"], tmp_path)
        shoot(receiver, "web-done.png", tmp_path)
        got = info.value.path()
        assert sha256_file(Path(got)) == sha256_file(source)

        folder = tmp_path / "Holiday 2026"
        for name, size in [
            ("day 1/beach.jpg", 300_000),
            ("day 2/hills.jpg", 200_000),
            ("notes.txt", 900),
        ]:
            random_file((folder / name).parent, size, name=Path(name).name)
        sender.page.reload()
        sender.by_id("send-folder").set_input_files(str(folder))
        sender.by_id("send-button").click()
        code = sender.code()
        check_layout(sender, "folder code shown", PHONE["width"], tmp_path)
        shoot(sender, "web-folder.png", tmp_path)
        receiver.page.reload()
        receiver.by_id("receive-code").fill(code)
        receiver.by_id("receive-button").click()
        with receiver.page.expect_download() as info:
            receiver.by_id("accept-button").click()
        receiver.wait_state("done", timeout=60)
        sender.wait_state("done", timeout=30)
        assert info.value.suggested_filename == "Holiday 2026.zip"
    finally:
        sending_ctx.close()
        receiving_ctx.close()
    assert not errors, f"console errors: {errors}"
