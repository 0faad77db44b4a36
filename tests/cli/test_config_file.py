"""`pigeonhole serve --config FILE`: TOML settings under the environment and command line."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import websockets
from click.testing import CliRunner

from pigeonhole.cli.main import cli
from tests.support.process import ServeProcess, free_port

SETTINGS = """
port = 4100
motd = "from the file"
advertise-version = "1.0"
trusted-proxy = ["10.0.0.0/8", "192.168.0.0/16"]
disallow_list = true
no-archive = true
blur-usage = 3600
max-body-bytes = 2048
"""


def check(tmp_path: Path, text: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """`serve --config FILE ARGS --check-config` with no PIGEONHOLE_* but `env`'s."""
    path = tmp_path / "pigeonhole.toml"
    path.write_text(text)
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PIGEONHOLE_")}
    return CliRunner().invoke(
        cli, ["serve", "--config", str(path), *args, "--check-config"], env=unset | (env or {})
    )


def test_command_line_over_environment_over_file_over_default(tmp_path: Path) -> None:
    result = check(
        tmp_path, SETTINGS, "--port", "4200", env={"PIGEONHOLE_SERVE_MOTD": "from the env"}
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert got["port"] == 4200  # command line
    assert got["motd"] == "from the env"  # environment
    assert got["advertise_version"] == "1.0"  # file
    assert got["trusted_proxies"] == ["10.0.0.0/8", "192.168.0.0/16"]
    assert got["disallow_list"] is True and got["archive"] is False
    assert got["blur_usage"] == 3600 and got["limits"]["max_body_bytes"] == 2048
    assert got["prune_expiry"] == 660.0  # default
    # the flag pair by its positive name, and the command line over it
    assert json.loads(check(tmp_path, "archive = false\n").output)["archive"] is False
    assert json.loads(check(tmp_path, "archive = false\n", "--archive").output)["archive"]


def test_mistakes_in_the_file_are_refused_by_name(tmp_path: Path) -> None:
    unknown = check(tmp_path, "prot = 4000\n")
    assert unknown.exit_code == 2 and "no option named 'prot'" in unknown.output
    wrong = check(tmp_path, 'port = "four thousand"\n')
    assert wrong.exit_code == 2 and "'--port'" in wrong.output
    broken = check(tmp_path, "port = \n")
    assert broken.exit_code == 2 and "pigeonhole.toml" in broken.output
    negated = check(tmp_path, 'no-archive = "yes"\n')
    assert negated.exit_code == 2 and "no-archive must be true or false" in negated.output


async def welcome(url: str) -> dict[str, Any]:
    async with websockets.connect(url, proxy=None) as ws:
        return json.loads(await ws.recv())["welcome"]  # type: ignore[no-any-return]


def test_a_server_runs_from_the_file_on_every_address(tmp_path: Path) -> None:
    """`host = "::"` answers IPv4 and IPv6 on one port, as the reference's default does."""
    port = free_port()
    path = tmp_path / "pigeonhole.toml"
    path.write_text(
        f'host = "::"\nport = {port}\ndata-dir = "{tmp_path / "data"}"\nmotd = "hello"\n'
        "admin-port = 0\ntransit-port = 0\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIGEONHOLE_")}
    server = ServeProcess(
        tmp_path / "serve.log", "--config", str(path), port=port, port_option=False, env=env
    )
    with server:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as r:
            assert r.read() == b"Wormhole Relay\n"
        with urllib.request.urlopen(f"http://[::1]:{port}/", timeout=2) as r:
            assert r.read() == b"Wormhole Relay\n"
        four = asyncio.run(welcome(f"ws://127.0.0.1:{port}/v1"))
        six = asyncio.run(welcome(f"ws://[::1]:{port}/v1"))
        assert four["motd"] == six["motd"] == "hello"
        assert "ffff" not in json.dumps(four)  # IPv4 clients are seen as IPv4
        assert (tmp_path / "data" / "channel.sqlite").exists()
    assert server.returncode == 0, server.output()


def test_node_lanes_is_an_option_like_the_others(tmp_path: Path) -> None:
    """A node's batches at once come from the command line, the environment or the file
    (nothing below the command line reads the environment)."""
    assert json.loads(check(tmp_path, "").output)["node_lanes"] == 1
    assert json.loads(check(tmp_path, "node-lanes = 3\n").output)["node_lanes"] == 3
    got = check(tmp_path, "", env={"PIGEONHOLE_SERVE_NODE_LANES": "2"})
    assert json.loads(got.output)["node_lanes"] == 2
    assert json.loads(check(tmp_path, "", "--node-lanes", "4").output)["node_lanes"] == 4
    assert check(tmp_path, "", "--node-lanes", "0").exit_code == 2
