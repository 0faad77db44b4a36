"""The status page in headless Chromium (Debian's `chromium`), driven over the DevTools
protocol: it renders, it updates after new exchanges without a reload, it fits a phone's
width, and the console shows no error. A screenshot is taken (kept as
docs/status-screenshot.png with PIGEONHOLE_UPDATE_SCREENSHOT=1)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from pigeonhole.protocol.limits import BODY_TOO_LARGE, Limits
from pigeonhole.server.figures import declared
from tests.server.status_support import OTHER_APP, crowded, exchange, lonely
from tests.support.chromium import open_page
from tests.support.server import APPID

pytestmark = pytest.mark.asyncio

SCREENSHOT = Path(__file__).parents[2] / "docs" / "status-screenshot.png"
WINDOW = ["--window-size=1280,900"]
ADDRESS = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b")


class DevTools:
    """A small DevTools protocol client for one page that keeps every event it sees."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for raw in self._socket:
            message = json.loads(raw)
            future = self._waiting.pop(message.get("id", -1), None)
            if future is not None:
                future.set_result(message)
            elif "method" in message:
                self.events.append(message)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        await self._socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        message = await asyncio.wait_for(future, 30)
        if "error" in message:
            raise RuntimeError(message["error"])
        return message["result"]  # type: ignore[no-any-return]

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    async def until(self, expression: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while await self.evaluate(expression) is not True:
            assert time.monotonic() < deadline, f"not true in {timeout} s: {expression}"
            await asyncio.sleep(0.1)

    def problems(self) -> list[dict[str, Any]]:
        """Console errors and warnings, uncaught exceptions, failed loads."""
        bad = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            console = params.get("type") in ("error", "warning", "assert")
            if method == "Runtime.exceptionThrown" or (
                method == "Runtime.consoleAPICalled" and console
            ):
                bad.append(params)
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                bad.append(params["entry"])
        return bad

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def chromium(tmp_path: Path) -> AsyncIterator[DevTools]:
    """Headless Chromium on about:blank, its page attached with Runtime, Log and Page on."""
    with open_page(tmp_path / "chromium", "about:blank", WINDOW) as url:
        async with connect(url, max_size=None) as socket:
            tools = DevTools(socket)
            for domain in ("Runtime", "Log", "Page"):
                await tools.call(f"{domain}.enable")
            try:
                yield tools
            finally:
                await tools.close()


async def open_status(tools: DevTools, url: str) -> None:
    await tools.call("Page.navigate", url=url)
    await tools.until(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")
    await tools.until("Number(document.body.dataset.updates) >= 1")


async def test_the_page_renders_and_updates_without_a_reload(make_server, bound, clock, tmp_path):
    """Loaded once; new exchanges show up in the same document; no console error."""
    async with make_server(status_refresh=0.3, limits=Limits(max_body_bytes=16)) as srv:
        url = f"http://127.0.0.1:{srv.admin_port}/status"
        async with chromium(tmp_path) as page:
            await open_status(page, url)
            assert await page.evaluate("document.title") == "Pigeonhole status"
            assert await page.evaluate("document.getElementById('ex-hour').textContent") == "0"
            assert await page.evaluate("document.getElementById('health').textContent") == (
                "healthy"
            )
            # a mark on this document: a reload would lose it
            await page.evaluate("window.loadMark = 'first load'; true")
            updates = await page.evaluate("Number(document.body.dataset.updates)")

            # over four minutes of the server's clock, so the charts have a history
            await exchange(bound, "40", srv=srv)
            await exchange(bound, "41", srv=srv)
            clock.advance(60)
            srv.status.tick()  # the minute ends (the timer's tick, at once)
            await exchange(bound, "42", srv=srv)
            await exchange(bound, "43", "scary", srv=srv)
            clock.advance(60)
            srv.status.tick()  # the minute ends (the timer's tick, at once)
            await exchange(bound, "44", appid=OTHER_APP, srv=srv)
            await lonely(bound, "solo", srv)
            clock.advance(60)
            srv.status.tick()  # the minute ends (the timer's tick, at once)
            await exchange(bound, "45", srv=srv)
            await crowded(bound, "three", srv)
            refused = await bound("x", APPID, srv)
            await refused.open("big")
            await refused.expect_error(
                f"{BODY_TOO_LARGE} (32 > 16 bytes)", "add", phase="p", body="ab" * 32
            )

            await page.until("document.body.dataset.started === '9'")
            await page.until("document.body.dataset.finished === '8'")
            # the refusal came last: a refresh may have shown the exchanges before it
            shown = "document.getElementById('limits').textContent"
            await page.until(f"{shown}.includes({json.dumps(BODY_TOO_LARGE)})")
            assert await page.evaluate("window.loadMark") == "first load"
            assert await page.evaluate("performance.getEntriesByType('navigation').length") == 1
            assert await page.evaluate("Number(document.body.dataset.updates)") > updates
            figures = await page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('.tile')].map(t => "
                "[t.querySelector('.label').textContent, t.querySelector('.value').textContent]))"
            )
            assert figures["Exchanges, last hour"] == "9"
            assert figures["Success rate, last hour"] == "62.5 %"  # 5 happy of 8 finished
            assert figures["Connections now"] == "1"
            apps = await page.evaluate(
                "[...document.querySelectorAll('#apps td')].map(td => td.textContent)"
            )
            assert apps == [APPID, "8", OTHER_APP, "1"]
            limits = await page.evaluate("document.getElementById('limits').textContent")
            assert BODY_TOO_LARGE in limits
            # every figure this server declares is on the page, with the value /metrics has
            shown = await page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('#figures tr')]"
                ".map(r => [r.cells[0].textContent, r.cells[1].textContent]))"
            )
            names = {name.split(" {")[0] for name in shown}
            assert {f.name for f in declared(srv.ctx)} <= names, sorted(names)
            assert shown["pigeonhole_exchanges_started_total"] == "9"
            assert shown["pigeonhole_exchanges_finished_total {happy}"] == "5"
            # every chart drew its bars or lines; the exchanges chart one bar per result seen
            shapes = await page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('svg.chart')].map(s => "
                "[s.id, s.querySelectorAll('rect, path').length]))"
            )
            assert all(n > 0 for n in shapes.values()), shapes
            assert shapes["chart-ex"] >= 4 + 1  # happy, scary, lonely, crowded; started
            fetched = await page.evaluate(
                "performance.getEntriesByType('resource').map(e => e.name)"
                ".filter(n => !n.endsWith('/status.json'))"
            )
            assert fetched == []  # nothing but its own figures
            await _screenshot(page, tmp_path)

            # a phone: nothing wider than the screen
            await page.call(
                "Emulation.setDeviceMetricsOverride",
                width=390,
                height=844,
                deviceScaleFactor=1,
                mobile=True,
            )
            await page.until("document.documentElement.scrollWidth <= 390")
            await _screenshot(page, tmp_path, "phone")
            await refused.disconnect()
            assert page.problems() == []


async def _screenshot(page: DevTools, tmp_path: Path, kind: str = "") -> None:
    size = (await page.call("Page.getLayoutMetrics"))["cssContentSize"]
    shot = await page.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
    )
    data = base64.b64decode(shot["data"])
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
    keep = os.environ.get("PIGEONHOLE_UPDATE_SCREENSHOT") == "1" and not kind
    (SCREENSHOT if keep else tmp_path / f"{kind}{SCREENSHOT.name}").write_bytes(data)


async def test_the_page_shows_no_address_under_blur_usage(make_server, connect, tmp_path):
    """Under --blur-usage the rendered page holds no client address; without, it does."""
    headers = {"X-Real-IP": "203.0.113.9"}
    for blur in (None, 60):
        async with make_server(blur_usage=blur, status_refresh=0.3) as srv:
            client = await connect(srv, headers)
            await client.bind(APPID, "a")
            await client.open("m")
            await client.add("p", "aa")
            async with chromium(tmp_path / str(blur)) as page:
                await open_status(page, f"http://127.0.0.1:{srv.admin_port}/status")
                text = await page.evaluate("document.body.innerText")
                assert page.problems() == []
            await client.disconnect()
        if blur is None:
            assert "203.0.113.9" in text
        else:
            assert ADDRESS.search(text) is None, ADDRESS.search(text)
            assert "--blur-usage" in text
