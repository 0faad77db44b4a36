"""Headless Chromium (Debian's `chromium`) for every browser test and benchmark: the one
list of flags this machine needs (env/machines/python-svc.md: no sandbox as root, no
network beyond loopback) and the one launcher that drives it over DevTools.

- `launch`: Chromium on a page with a fresh profile, its DevTools port and browser socket;
  stopped by its PID on leaving (bench/web_transfer.py, bench/web_receive_memory.py).
- `open_page`: the same, giving the page's DevTools socket (the status page's and the
  report's tests).
- `DevTools`: a synchronous DevTools connection to one target.

The web page's tests drive the same flags through Playwright (tests/web/web_support.py).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import stop

#: what every launch needs (Playwright adds --headless and a profile of its own)
BASE_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
#: a launch that the test drives over DevTools itself
FLAGS = ["--headless", *BASE_FLAGS, "--remote-debugging-port=0"]


def chromium_binary() -> str:
    """The Chromium executable; the test is skipped without one."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("no chromium (Debian package `chromium`)")
    return binary


@dataclass(frozen=True)
class Launched:
    """A running Chromium: its process, DevTools port and browser-wide DevTools socket."""

    process: subprocess.Popen[bytes]
    port: int
    browser_socket: str


def _devtools_port(
    port_file: Path, process: subprocess.Popen[bytes], timeout: float = 30.0
) -> tuple[int, str]:
    """The DevTools port and browser socket path Chromium writes into its profile."""
    deadline = time.monotonic() + timeout
    while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError("Chromium did not open its DevTools port")
        time.sleep(0.05)
    port, path = port_file.read_text().split()[:2]
    return int(port), path


@contextlib.contextmanager
def launch(
    profile: Path, url: str = "about:blank", extra: Sequence[str] = ()
) -> Iterator[Launched]:
    """Chromium on `url` with a fresh `profile` (made here) and the `extra` flags; stopped
    (by its PID) on leaving."""
    profile.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [chromium_binary(), *FLAGS, *extra, f"--user-data-dir={profile}", url],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port, path = _devtools_port(profile / "DevToolsActivePort", process)
        yield Launched(process, port, f"ws://127.0.0.1:{port}{path}")
    finally:
        stop(process, timeout=15)


def page_socket(port: int, url: str | None = None) -> str:
    """The DevTools WebSocket of Chromium's page (showing `url`, if given)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
            targets = json.load(answer)
        for target in targets:
            if target.get("type") == "page" and url in (None, target.get("url")):
                return str(target["webSocketDebuggerUrl"])
        time.sleep(0.1)
    raise AssertionError("Chromium did not open the page")


@contextlib.contextmanager
def open_page(profile: Path, url: str, extra: Sequence[str] = ()) -> Iterator[str]:
    """Chromium on `url` with a fresh `profile`: the page's DevTools WebSocket URL."""
    with launch(profile, url, extra) as browser:
        yield page_socket(browser.port, None if url == "about:blank" else url)


class DevTools:
    """A synchronous DevTools connection to one target: `call` waits for its reply; `send`
    does not (its reply is kept for `reply`), and events that arrive meanwhile are kept
    for `wait_event`."""

    def __init__(self, url: str, timeout: float = 300.0) -> None:
        from websockets.sync.client import connect

        self.timeout = timeout
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(url, max_size=None, open_timeout=10))
        self._ids = iter(range(1, 1 << 30))
        self.replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []

    def _read(self, timeout: float) -> None:
        message = json.loads(self.ws.recv(timeout=timeout))
        if "id" in message:
            self.replies[int(message["id"])] = message
        else:
            self.events.append(message)

    def send(self, method: str, **params: Any) -> int:
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        return call_id

    def reply(self, call_id: int, timeout: float | None = None) -> dict[str, Any]:
        """The result of call `call_id`, waited for."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while call_id not in self.replies:
            self._read(max(deadline - time.monotonic(), 0.0))
        message = self.replies.pop(call_id)
        if "error" in message:
            raise RuntimeError(f"DevTools call {call_id}: {message['error']}")
        return dict(message.get("result", {}))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.reply(self.send(method, **params))

    def wait_event(
        self, method: str, test: Callable[[dict[str, Any]], bool], timeout: float
    ) -> None:
        """Wait for an event `method` whose parameters pass `test` (other events dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method and test(event.get("params", {})):
                    self.events.remove(event)
                    return
            self.events.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no {method} in {timeout:g} s")
            with contextlib.suppress(TimeoutError):
                self._read(left)

    @staticmethod
    def value(result: dict[str, Any]) -> Any:
        """The value of a `Runtime.evaluate` result (raises what the expression threw)."""
        if "exceptionDetails" in result:
            raise RuntimeError(f"the expression threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def evaluate(self, expression: str, await_promise: bool = False) -> Any:
        return self.value(
            self.call(
                "Runtime.evaluate",
                expression=expression,
                returnByValue=True,
                awaitPromise=await_promise,
            )
        )

    def close(self) -> None:
        self._stack.close()
