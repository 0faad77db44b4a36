"""The page in the engines other than Chromium, driven the same way through its automation
contract (`data-testid`s) by JavaScript expressions and file inputs:

- Firefox: Debian's `firefox-esr`, headless, through puppeteer-core's WebDriver BiDi
  (web/testing/firefox-bridge.mjs, a node process this side talks JSON lines with);
- WebKit (Safari's engine): Debian's `WebKitWebDriver` with WebKitGTK's MiniBrowser, which
  has no headless mode, under `xvfb-run`, through Selenium (file inputs: Selenium's local
  file detector is switched off, WebKitWebDriver has no upload command).

Each browser is started per test module and stopped by PID with all it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import kill_tree
from tests.web.web_support import PAGE_CODE_RE, PageFailed

ROOT = Path(__file__).resolve().parents[2]
FIREFOX = Path("/usr/bin/firefox-esr")
WEBKIT_DRIVER = Path("/usr/bin/WebKitWebDriver")
MINIBROWSER = Path("/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser")
ENGINES = ("firefox", "webkit")


def q(testid: str) -> str:
    """A JS expression: the element with `testid`."""
    return f"document.querySelector('[data-testid={json.dumps(testid)}]')"


class EngineTab:
    """The page in one tab of a non-Chromium engine; subclasses say how to drive it."""

    engine = ""

    def __init__(self, base_url: str, downloads: Path) -> None:
        self.base_url = base_url
        self.downloads = downloads

    # -- what each driver provides

    def goto(self, url: str) -> None:
        raise NotImplementedError

    def js(self, expr: str) -> Any:
        """The JSON value of the JS expression `expr` in the page."""
        raise NotImplementedError

    def set_files(self, testid: str, paths: list[Path]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- the page, through its contract

    def open(self) -> EngineTab:
        self.goto(self.base_url + "/")
        deadline = time.monotonic() + 30
        while self.js(f"!!{q('transfer')} && document.readyState === 'complete'") is not True:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.engine}: the page did not load")
            time.sleep(0.1)
        return self

    def state(self) -> str:
        return str(self.js(f"{q('transfer')}.dataset.state"))

    def message(self) -> str:
        return str(self.js(f"{q('transfer')}.innerText")).strip()

    def fill(self, testid: str, value: str) -> None:
        self.js(
            f"(e => {{ e.value = {json.dumps(value)}; "
            "e.dispatchEvent(new Event('input', {bubbles: true})); return true; })"
            f"({q(testid)})"
        )

    def click(self, testid: str) -> None:
        self.js(f"({q(testid)}.click(), true)")

    def visible(self, testid: str) -> bool:
        return bool(self.js(f"(e => !!e && !e.hidden && e.offsetParent !== null)({q(testid)})"))

    def wait_state(self, *states: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            now = self.state()
            if now in states:
                return now
            if now == "failed":
                raise PageFailed(f"{self.engine}: the page failed: {self.message()!r}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.engine}: stayed {now!r}, not {states}: {self.message()!r}"
                )
            time.sleep(0.1)

    def code(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while not PAGE_CODE_RE.match(shown := str(self.js(f"{q('code')}.textContent")).strip()):
            if self.state() == "failed" or time.monotonic() > deadline:
                raise AssertionError(f"{self.engine}: no code ({shown!r}): {self.message()!r}")
            time.sleep(0.05)
        return shown

    def send_text(self, text: str) -> str:
        self.fill("send-text", text)
        self.click("send-button")
        return self.code()

    def send_file(self, path: Path) -> str:
        self.set_files("send-file", [path])
        self.click("send-button")
        return self.code()

    def enter_code(self, code: str) -> None:
        self.fill("receive-code", code)
        self.click("receive-button")

    def accept(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.visible("accept-button"):
            if self.state() == "failed" or time.monotonic() > deadline:
                raise AssertionError(f"{self.engine}: no offer shown: {self.message()!r}")
            time.sleep(0.05)
        self.click("accept-button")

    def downloaded(self, name: str, size: int, timeout: float = 60.0) -> Path:
        """The download `name`, once the browser has written all `size` bytes of it."""
        path = self.downloads / name
        deadline = time.monotonic() + timeout
        while True:
            partial = [p.name for p in self.downloads.iterdir() if p.name != name]
            if path.exists() and path.stat().st_size == size and not partial:
                return path
            if time.monotonic() > deadline:
                listing = {p.name: p.stat().st_size for p in self.downloads.iterdir()}
                raise AssertionError(f"{self.engine}: no complete {name} in {listing}")
            time.sleep(0.1)


# ------------------------------------------------------------------------------ Firefox


class FirefoxTab(EngineTab):
    engine = "firefox"

    def __init__(self, base_url: str, downloads: Path) -> None:
        super().__init__(base_url, downloads)
        bridge = ROOT / "web" / "testing" / "firefox-bridge.mjs"
        self.proc = subprocess.Popen(
            ["node", str(bridge), str(downloads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
            env={**os.environ, "MOZ_CRASHREPORTER_DISABLE": "1"},
        )  # fmt: skip
        self.version = self._reply()

    def _reply(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the Firefox bridge exited ({self.proc.poll()})")
        reply = json.loads(line)
        if not reply["ok"]:
            raise AssertionError(f"firefox: {reply['error']}")
        return reply.get("value")

    def _call(self, **command: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def goto(self, url: str) -> None:
        self._call(op="goto", url=url)

    def js(self, expr: str) -> Any:
        return self._call(op="eval", expr=expr)

    def set_files(self, testid: str, paths: list[Path]) -> None:
        self._call(op="files", selector=f"[data-testid={testid}]", paths=[str(p) for p in paths])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._call(op="close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        kill_tree(self.proc)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- WebKit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebKitTab(EngineTab):
    engine = "webkit"

    def __init__(self, base_url: str, downloads: Path) -> None:
        super().__init__(base_url, downloads)
        from selenium import webdriver
        from selenium.webdriver.remote.client_config import ClientConfig
        from selenium.webdriver.remote.file_detector import UselessFileDetector
        from selenium.webdriver.remote.remote_connection import RemoteConnection
        from selenium.webdriver.webkitgtk.options import Options

        port = _free_port()
        # MiniBrowser saves downloads into the user's download directory, which GLib reads
        # from user-dirs.dirs (else it is $HOME): a home of its own says it is `downloads`
        home = downloads.parent / f"{downloads.name}-home"
        (home / ".config").mkdir(parents=True, exist_ok=True)
        (home / ".config" / "user-dirs.dirs").write_text(f'XDG_DOWNLOAD_DIR="{downloads}"\n')
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
        self.proc = subprocess.Popen(
            ["xvfb-run", "-a", str(WEBKIT_DRIVER), f"--port={port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    kill_tree(self.proc)
                    raise AssertionError("WebKitWebDriver did not start") from None
                time.sleep(0.1)
        address = f"http://127.0.0.1:{port}"
        options = Options()
        options.binary_location = str(MINIBROWSER)
        options.add_argument("--automation")
        try:
            self.driver = webdriver.Remote(
                command_executor=RemoteConnection(client_config=ClientConfig(address)),
                options=options,
                file_detector=UselessFileDetector(),
            )
        except Exception:
            kill_tree(self.proc)
            raise
        self.driver.set_script_timeout(120)
        self.version = self.driver.capabilities.get("browserVersion", "")

    def goto(self, url: str) -> None:
        self.driver.get(url)

    def js(self, expr: str) -> Any:
        return self.driver.execute_script(f"return ({expr});")

    def set_files(self, testid: str, paths: list[Path]) -> None:
        from selenium.webdriver.common.by import By

        field = self.driver.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]")
        field.send_keys("\n".join(str(p) for p in paths))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.driver.quit()
        kill_tree(self.proc)


def skip_unless_installed(engine: str) -> None:
    needs = {
        "firefox": [FIREFOX, Path(shutil.which("node") or "/nonexistent")],
        "webkit": [WEBKIT_DRIVER, MINIBROWSER, Path(shutil.which("xvfb-run") or "/nonexistent")],
    }[engine]
    missing = [str(p) for p in needs if not p.exists()]
    if missing:
        pytest.skip(f"{engine}: not installed ({', '.join(missing)}; scripts/setup --test)")
    if engine == "firefox" and not (ROOT / "web" / "node_modules" / "puppeteer-core").exists():
        pytest.skip("puppeteer-core is not installed (scripts/setup: npm ci in web/)")
    if engine == "webkit":
        pytest.importorskip("selenium", reason="the test extra installs it")


@contextlib.contextmanager
def engine_tab(engine: str, base_url: str, downloads: Path) -> Iterator[EngineTab]:
    skip_unless_installed(engine)
    downloads.mkdir(parents=True, exist_ok=True)
    tab: EngineTab = (
        FirefoxTab(base_url, downloads) if engine == "firefox" else WebKitTab(base_url, downloads)
    )
    try:
        yield tab
    finally:
        tab.close()
