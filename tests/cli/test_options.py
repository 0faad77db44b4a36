"""`serve`'s options are the config's declarations: names, environment, file, bounds."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from pigeonhole.cli.main import cli
from pigeonhole.cli.options import declarations
from pigeonhole.cli.serve import serve
from pigeonhole.config import ServerConfig
from pigeonhole.protocol.limits import MiB

#: the settings declared for work that lands beside this (defaults the lead wires in)
NEW_SETTINGS = {
    "node_lanes": 1,
    "ipv6_prefix": 64,
    "archive_max_bytes_per_address": 32 * MiB,
    "archive_max_bytes": 1024 * MiB,
    "archive_disk_free": 1024 * MiB,
}


def resolved(*args: str, env: dict[str, str] | None = None, toml: Path | None = None) -> Any:
    """`serve ARGS --check-config` with no PIGEONHOLE_* variables but `env`'s."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PIGEONHOLE_")}
    config = ["--config", str(toml)] if toml else []
    return CliRunner().invoke(
        cli, ["serve", *config, *args, "--check-config"], env=unset | (env or {})
    )


def test_every_option_is_a_declared_setting_with_its_environment_name() -> None:
    options = [p for p in serve.params if isinstance(p, click.Option)]
    settings = {p.name: p for p in options if p.name not in ("config", "check_config")}
    assert list(settings) == [item.name for item in declarations(ServerConfig)]
    for name, option in settings.items():
        assert option.envvar == f"PIGEONHOLE_SERVE_{name.upper()}", name
        assert option.help and option.show_default, name
    limits = {item.name for item in dataclasses.fields(ServerConfig().limits)}
    assert limits <= set(settings)  # the nested limits are options too


def test_the_defaults_are_the_configs() -> None:
    """Resolved with nothing set, the settings are a default ServerConfig's."""
    result = resolved()
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    expected = json.loads(json.dumps(dataclasses.asdict(ServerConfig()), default=str))
    assert got == expected
    assert {name: got[name] for name in NEW_SETTINGS} == NEW_SETTINGS


def test_new_settings_come_from_the_environment_the_file_and_the_command_line(
    tmp_path: Path,
) -> None:
    toml = tmp_path / "pigeonhole.toml"
    toml.write_text("ipv6-prefix = 48\narchive_max_bytes = 4096\n")
    env = {"PIGEONHOLE_SERVE_NODE_LANES": "4", "PIGEONHOLE_SERVE_ARCHIVE_DISK_FREE": "0"}
    result = resolved("--archive-max-bytes-per-address", "1024", env=env, toml=toml)
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert (got["node_lanes"], got["archive_disk_free"]) == (4, 0)
    assert (got["ipv6_prefix"], got["archive_max_bytes"]) == (48, 4096)
    assert got["archive_max_bytes_per_address"] == 1024


def test_bounds_are_refused_by_option_name() -> None:
    for args in (
        ["--node-lanes", "0"],
        ["--ipv6-prefix", "7"],
        ["--ipv6-prefix", "129"],
        ["--archive-max-bytes", "-1"],
        ["--max-queued-frames", "7"],
        ["--commit-sync", "never"],
    ):
        result = resolved(*args)
        assert result.exit_code == 2 and f"'{args[0]}'" in result.output, args


def test_permissions_are_one_comma_separated_value_or_a_list_in_the_file(
    tmp_path: Path,
) -> None:
    both = resolved(env={"PIGEONHOLE_SERVE_PERMISSIONS": "none, hashcash"})
    assert json.loads(both.output)["permissions"] == ["none", "hashcash"]
    toml = tmp_path / "pigeonhole.toml"
    toml.write_text('permissions = ["hashcash"]\n')
    assert json.loads(resolved(toml=toml).output)["permissions"] == ["hashcash"]
    for wrong in ("magic", "none,magic", ","):
        refused = resolved("--permissions", wrong)
        assert refused.exit_code == 2 and "'--permissions'" in refused.output, wrong


def test_contradictions_between_options_are_refused() -> None:
    store = resolved("--store", "mysql://db")
    assert store.exit_code == 2 and "a postgresql:// URL" in store.output
    half = resolved("--tls-key", "/nonexistent.pem")
    assert half.exit_code == 2 and "give both --tls-cert and --tls-key" in half.output
