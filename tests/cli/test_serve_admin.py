"""`pigeonhole serve`'s admin listener: /status and /metrics there, not on the public port."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from pigeonhole.config import DEFAULT_ADMIN_PORT, ServerConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0  # nothing listens


@contextlib.contextmanager
def _serve(data: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[int]:
    port = _free_port()
    command = [sys.executable, "-m", "pigeonhole", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--data-dir", str(data), *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while _status(f"http://127.0.0.1:{port}/") != 200:
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.05)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_the_admin_port_is_named_and_not_the_transit_relays() -> None:
    """A fixed default port on loopback, shown in --help; not 4000 (mailbox), not 4001."""
    assert ServerConfig().admin_host == "127.0.0.1"
    assert ServerConfig().admin_port == DEFAULT_ADMIN_PORT == 4080
    out = subprocess.run(
        [sys.executable, "-m", "pigeonhole", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    for option in ("--admin-host", "--admin-port", "--no-admin", "--public-metrics"):
        assert option in out, option
    assert "[default: 4080;" in out


def test_metrics_and_status_moved_to_the_admin_listener(tmp_path: Path) -> None:
    """Public: /, /health; admin (port from PIGEONHOLE_SERVE_ADMIN_PORT): all four routes."""
    admin = _free_port()
    env = {"PIGEONHOLE_SERVE_ADMIN_PORT": str(admin)}
    with _serve(tmp_path / "a", env=env) as port:
        public = f"http://127.0.0.1:{port}"
        assert [_status(public + p) for p in ("/", "/health")] == [200, 200]
        assert [_status(public + p) for p in ("/metrics", "/status", "/status.json")] == [404] * 3
        base = f"http://127.0.0.1:{admin}"
        for path in ("/metrics", "/status", "/status.json", "/health"):
            assert _status(base + path) == 200, path
        with urllib.request.urlopen(base + "/status.json", timeout=5) as answer:
            figures = json.load(answer)
        assert figures["version"] and figures["store"]["kind"] == "SQLite"


def test_public_metrics_and_no_admin(tmp_path: Path) -> None:
    """--public-metrics brings /metrics back on the public port; --no-admin: no listener."""
    admin = _free_port()
    with _serve(tmp_path / "b", "--public-metrics", "--admin-port", str(admin)) as port:
        assert _status(f"http://127.0.0.1:{port}/metrics") == 200
        assert _status(f"http://127.0.0.1:{port}/status") == 404
        assert _status(f"http://127.0.0.1:{admin}/status") == 200
    with _serve(tmp_path / "c", "--no-admin", "--admin-port", str(admin)):
        assert _status(f"http://127.0.0.1:{admin}/status") == 0
