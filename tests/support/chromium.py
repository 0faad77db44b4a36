"""Headless Chromium (Debian's `chromium`) for the page tests: the flags this machine needs
(env/machines/python-svc.md: no sandbox as root, no network beyond loopback) and the
DevTools socket of the page it opens."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


def chromium_binary() -> str:
    """The Chromium executable; the test is skipped without one."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("no chromium (Debian package `chromium`)")
    return binary


def page_socket(port_file: Path, url: str | None = None) -> str:
    """The DevTools WebSocket of Chromium's page (showing `url`, if given)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            port = port_file.read_text().split()[0]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                targets = json.load(answer)
            for target in targets:
                if target.get("type") == "page" and url in (None, target.get("url")):
                    return str(target["webSocketDebuggerUrl"])
        time.sleep(0.1)
    raise AssertionError("Chromium did not open the page")
