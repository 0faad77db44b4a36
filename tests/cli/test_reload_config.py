"""The settings read again as at start (cli/reload.py): the file anew, the same precedence,
and a clear error, with the line at fault, for what cannot be used."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pigeonhole.cli.reload import ConfigError, ConfigReader
from pigeonhole.cli.serve import ENV_PREFIX, refuse_contradictions, serve
from tests.support.process import PIGEONHOLE


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("PIGEONHOLE_"):
            monkeypatch.delenv(name)
    yield


def reader(path: Path, *args: str) -> ConfigReader:
    return ConfigReader(serve, ["--config", str(path), *args], refuse_contradictions, ENV_PREFIX)


def test_the_file_is_read_anew_under_the_command_line_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pigeonhole.toml"
    path.write_text('motd = "first"\nport = 4100\nhashcash-bits = 21\n')
    monkeypatch.setenv("PIGEONHOLE_SERVE_ADVERTISE_VERSION", "0.9")
    read = reader(path, "--hashcash-bits", "23")
    first = read.read()
    assert (first.motd, first.port, first.hashcash_bits) == ("first", 4100, 23)
    assert first.advertise_version == "0.9"
    path.write_text('motd = "second"\nport = 4200\nadvertise-version = "1.0"\nmax-creations = 6\n')
    second = read.read()
    assert (second.motd, second.port, second.limits.max_creations) == ("second", 4200, 6)
    assert second.hashcash_bits == 23  # the command line still wins
    assert second.advertise_version == "0.9"  # and the environment over the file


def test_a_file_that_does_not_parse_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "pigeonhole.toml"
    path.write_text('motd = "fine"\nport = = 4\n')
    with pytest.raises(ConfigError, match=r"pigeonhole.toml: .*\(at line 2, column 8\)"):
        reader(path).read()


def test_a_value_out_of_bounds_names_the_line_that_set_it(tmp_path: Path) -> None:
    path = tmp_path / "pigeonhole.toml"
    path.write_text('motd = "fine"\n\n  hashcash_bits = 99  # too many\n')
    with pytest.raises(ConfigError) as refused:
        reader(path).read()
    message = str(refused.value)
    assert message.startswith(f"{path}:3: ")
    assert "99 is not in the range 1<=x<=40" in message
    assert "'hashcash_bits = 99  # too many'" in message


def test_a_value_from_the_command_line_is_not_blamed_on_the_file(tmp_path: Path) -> None:
    path = tmp_path / "pigeonhole.toml"
    path.write_text("hashcash-bits = 20\n")
    with pytest.raises(ConfigError) as refused:
        reader(path, "--max-creations", "0").read()
    assert str(path) not in str(refused.value) and "0 is not in the range" in str(refused.value)


def test_unknown_keys_contradictions_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "pigeonhole.toml"
    path.write_text("prot = 4000\n")
    with pytest.raises(ConfigError, match="no option named 'prot'"):
        reader(path).read()
    path.write_text('tls-cert = "/etc/cert.pem"\n')
    with pytest.raises(ConfigError, match="give both --tls-cert and --tls-key"):
        reader(path).read()
    path.unlink()
    with pytest.raises(ConfigError, match="does not exist"):
        reader(path).read()


def test_serve_refuses_a_bad_rule_file_at_start_with_its_line(tmp_path: Path) -> None:
    rules = tmp_path / "deny.txt"
    rules.write_text("deny 10.0.0.0/8 fine\nnotice 10.1.2.3/8 a typo\n")
    ports = ["--port", "0", "--admin-port", "0", "--transit-port", "0"]
    result = subprocess.run(
        [
            *PIGEONHOLE,
            "serve",
            *ports,
            "--data-dir",
            str(tmp_path / "data"),
            "--deny-file",
            str(rules),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"{rules}:2: 10.1.2.3/8 has host bits set (the network is 10.0.0.0/8)" in (result.stderr)
    assert "Traceback" not in result.stderr
