"""The HTML report opened in headless Chromium: it renders and shows every chart.

Chromium is driven over the DevTools protocol (a WebSocket, with the `websockets` test
dependency); a full-page screenshot is taken (kept as docs/report-screenshot.png when
PIGEONHOLE_UPDATE_SCREENSHOT=1).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.report_run import ReportRun
from tests.support.chromium import open_page

SCREENSHOT = Path(__file__).parents[2] / "docs" / "report-screenshot.png"
WINDOW = ["--window-size=1100,900"]


class DevTools:
    """A minimal DevTools protocol client for one page."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        self._socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=30))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]  # type: ignore[no-any-return]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")


@pytest.fixture(scope="module")
def page(report_run: ReportRun, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    """Chromium showing OUTPUT/index.html, loaded."""
    client = pytest.importorskip("websockets.sync.client", reason="websockets drives Chromium")
    profile = tmp_path_factory.mktemp("chromium")
    url = (report_run.out / "index.html").as_uri()
    with (
        open_page(profile, url, WINDOW) as socket_url,
        client.connect(socket_url, max_size=None) as socket,
    ):
        tools = DevTools(socket)
        deadline = time.monotonic() + 30
        # the target can still show its initial blank document, which is "complete" too
        loaded = "document.readyState === 'complete' && location.href === " + json.dumps(url)
        while tools.evaluate(loaded) is not True:
            assert time.monotonic() < deadline, "the page did not finish loading"
            time.sleep(0.1)
        yield tools


def test_the_report_renders_with_its_title_and_sections(page: DevTools) -> None:
    """The page has its title, key figures, chart headings and the tables list."""
    assert page.evaluate("document.title") == "Pigeonhole usage report"
    headings = page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)")
    assert "Peak concurrency per hour" in headings and "Tables" in headings
    assert page.evaluate("document.querySelectorAll('.figure').length") == 4


def test_every_chart_is_decoded_and_visible(page: DevTools) -> None:
    """All 7 PNG charts decode (natural size > 0) and are laid out at a readable size."""
    images = page.evaluate("""[...document.images].map(i => ({alt: i.alt,
        ok: i.complete && i.naturalWidth > 0, width: i.getBoundingClientRect().width}))""")
    assert len(images) == 7
    assert all(i["ok"] and i["width"] > 600 for i in images), images


def test_nothing_is_fetched_from_the_network(page: DevTools) -> None:
    """The page loads no resource over HTTP(S): it is self-contained."""
    fetched = page.evaluate(
        "performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => n.startsWith('http'))"
    )
    assert fetched == []


def test_a_screenshot_of_the_whole_page_is_taken(
    page: DevTools, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A full-page PNG screenshot is taken; PIGEONHOLE_UPDATE_SCREENSHOT=1 keeps it in docs/."""
    size = page.call("Page.getLayoutMetrics")["cssContentSize"]
    shot = page.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
    )
    data = base64.b64decode(shot["data"])
    assert data.startswith(b"\x89PNG") and len(data) > 50_000
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 800 and height >= 2000, (width, height)
    target = (
        SCREENSHOT
        if os.environ.get("PIGEONHOLE_UPDATE_SCREENSHOT") == "1"
        else tmp_path_factory.mktemp("shot") / SCREENSHOT.name
    )
    target.write_bytes(data)
