"""Headless Chromium (Debian's `chromium`) for every page test: the one list of flags this
machine needs (env/machines/python-svc.md: no sandbox as root, no network beyond
loopback), and `open_page`, which starts it on a page and gives that page's DevTools
socket (the status page's and the report's tests; the web page's tests drive the same
flags through Playwright, tests/web/web_support.py)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

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


@contextlib.contextmanager
def open_page(profile: Path, url: str, extra: Sequence[str] = ()) -> Iterator[str]:
    """Chromium on `url` with a fresh `profile`: the page's DevTools WebSocket URL; stopped
    (by its PID) on leaving."""
    process = subprocess.Popen(
        [chromium_binary(), *FLAGS, *extra, f"--user-data-dir={profile}", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield page_socket(profile / "DevToolsActivePort", None if url == "about:blank" else url)
    finally:
        process.terminate()
        process.wait(timeout=10)
