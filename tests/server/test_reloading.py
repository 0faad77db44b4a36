"""What a reload changes (server/reloading.py): live settings taken, restart-only ones kept."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pigeonhole.config import ServerConfig
from pigeonhole.server.reloading import applicable, changes, restart_only


def test_changes_name_each_setting_and_whether_it_needs_a_restart() -> None:
    old = ServerConfig()
    new = dataclasses.replace(
        old,
        port=4100,
        motd="hello",
        trusted_proxies=("10.0.0.0/8",),
        limits=dataclasses.replace(old.limits, max_creations=9),
    )
    found = {change.option: change for change in changes(old, new)}
    assert set(found) == {"--port", "--motd", "--trusted-proxy", "--max-creations"}
    assert found["--port"].restart and not found["--motd"].restart
    assert not found["--max-creations"].restart
    assert str(found["--port"]) == "--port 4000 -> 4100"
    assert str(found["--motd"]) == "--motd none -> hello"
    assert str(found["--trusted-proxy"]) == "--trusted-proxy 127.0.0.0/8,::1/128 -> 10.0.0.0/8"
    assert changes(old, dataclasses.replace(old)) == []


def test_the_config_taken_keeps_restart_only_settings_and_what_is_no_option() -> None:
    old = dataclasses.replace(ServerConfig(), websocket_path="/test", port=0)
    new = dataclasses.replace(
        ServerConfig(),
        port=4100,
        data_dir=Path("/elsewhere"),
        hashcash_bits=22,
        deny_file=Path("/etc/pigeonhole/deny.txt"),
        transit_max_rate=1000,
        limits=dataclasses.replace(old.limits, max_body_bytes=4096),
    )
    taken = applicable(old, new)
    assert (taken.port, taken.data_dir, taken.websocket_path) == (0, old.data_dir, "/test")
    assert taken.hashcash_bits == 22 and taken.transit_max_rate == 1000
    assert taken.deny_file == Path("/etc/pigeonhole/deny.txt")
    assert taken.limits.max_body_bytes == 4096
    assert taken.limits.max_creations == old.limits.max_creations
    assert applicable(old, old) is old


def test_what_the_issue_names_as_restart_only_is_and_the_live_list_is_not() -> None:
    """Listeners, the store, TLS files and node lanes need a restart; motd, the welcome,
    permissions, hashcash, every limit and quota, the rules, the log level and the
    relay's caps and timeouts apply live."""
    needs = set(restart_only())
    assert {
        "--host", "--port", "--data-dir", "--store", "--tls-cert", "--tls-key",
        "--node-lanes", "--transit-port", "--admin-host", "--admin-port",
    } <= needs  # fmt: skip
    live = {
        "--motd", "--signal-error", "--advertise-version", "--permissions",
        "--hashcash-bits", "--hashcash-max-bits", "--hashcash-load-threshold",
        "--deny-file", "--log-level", "--max-body-bytes", "--max-stored-bytes",
        "--max-connections", "--max-connections-per-address", "--commands-per-second",
        "--transit-handshake-timeout", "--transit-idle-timeout", "--transit-lonely-timeout",
        "--transit-max-connections", "--transit-max-rate", "--transit-max-bytes-per-transfer",
        "--transit-max-bytes-per-address-per-day",
    }  # fmt: skip
    assert not live & needs


def test_the_operations_guide_lists_the_restart_only_settings() -> None:
    """docs/operations.md, "Reload", names every restart-only option and no other."""
    guide = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    section = guide.split("\n## Reload\n", 1)[1].split("\n## ", 1)[0]
    para = section.split("What cannot is logged", 1)[1].split("\n- ", 1)[0]
    assert re.findall(r"`(--[a-z0-9-]+)`", para) == restart_only()
