"""`pigeonhole serve`'s admin listener: /status and /metrics there, not on the public port."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from pigeonhole.config import DEFAULT_ADMIN_PORT, ServerConfig
from tests.support.process import ServeProcess, free_port, http_status


@contextlib.contextmanager
def _serve(data: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[int]:
    server = ServeProcess(
        data.with_suffix(".log"), "--data-dir", str(data), *args, env={**os.environ, **(env or {})}
    )
    with server:
        yield server.port
    assert server.returncode == 0


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
    admin = free_port()
    env = {"PIGEONHOLE_SERVE_ADMIN_PORT": str(admin)}
    with _serve(tmp_path / "a", env=env) as port:
        public = f"http://127.0.0.1:{port}"
        assert [http_status(public + p) for p in ("/", "/health")] == [200, 200]
        assert [http_status(public + p) for p in ("/metrics", "/status", "/status.json")] == [
            404
        ] * 3
        base = f"http://127.0.0.1:{admin}"
        for path in ("/metrics", "/status", "/status.json", "/health"):
            assert http_status(base + path) == 200, path
        with urllib.request.urlopen(base + "/status.json", timeout=5) as answer:
            figures = json.load(answer)
        assert figures["version"] and figures["store"]["kind"] == "SQLite"


def test_public_metrics_and_no_admin(tmp_path: Path) -> None:
    """--public-metrics brings /metrics back on the public port; --no-admin: no listener."""
    admin = free_port()
    with _serve(tmp_path / "b", "--public-metrics", "--admin-port", str(admin)) as port:
        assert http_status(f"http://127.0.0.1:{port}/metrics") == 200
        assert http_status(f"http://127.0.0.1:{port}/status") == 404
        assert http_status(f"http://127.0.0.1:{admin}/status") == 200
    with _serve(tmp_path / "c", "--no-admin", "--admin-port", str(admin)):
        assert http_status(f"http://127.0.0.1:{admin}/status") == 0
