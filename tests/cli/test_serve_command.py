"""`pigeonhole serve` from the command line: options, environment variables, bad values."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import websockets

from tests.support.process import ServeProcess, free_port


async def _welcome(url: str) -> dict[str, object]:
    async with websockets.connect(url) as ws:
        return json.loads(await ws.recv())["welcome"]  # type: ignore[no-any-return]


def test_options_come_from_the_environment(tmp_path: Path) -> None:
    """PIGEONHOLE_SERVE_* variables set the options; the data dir holds every database."""
    port = free_port()
    env = {
        **os.environ,
        "PIGEONHOLE_SERVE_PORT": str(port),
        "PIGEONHOLE_SERVE_DATA_DIR": str(tmp_path / "data"),
        "PIGEONHOLE_SERVE_MOTD": "hello operators",
        "PIGEONHOLE_SERVE_ADVERTISE_VERSION": "9.9",
        "PIGEONHOLE_SERVE_LOG_FORMAT": "json",
    }
    server = ServeProcess(tmp_path / "serve.log", port=port, port_option=False, env=env)
    with server:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
        assert body == b"Wormhole Relay\n"
        welcome = asyncio.run(_welcome(f"ws://127.0.0.1:{port}/v1"))
        assert welcome["motd"] == "hello operators"
        assert welcome["current_cli_version"] == "9.9"
        assert sorted(p.name for p in (tmp_path / "data").glob("*.sqlite")) == [
            "archive.sqlite",
            "channel.sqlite",
            "usage.sqlite",
        ]
    assert server.returncode == 0
    stderr = server.output()
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any("listening on" in line["message"] for line in lines), stderr


def test_bad_option_values_are_refused() -> None:
    """Impossible values stop the command with a usage error, not a traceback."""
    for args in (["--permissions", "magic"], ["--tls-cert", "/nonexistent.pem"]):
        done = subprocess.run(
            [sys.executable, "-m", "pigeonhole", "serve", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 2, done.stderr
        assert "Error" in done.stderr and "Traceback" not in done.stderr
