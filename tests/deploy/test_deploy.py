"""The deployment kit: the systemd unit and the example settings file.

The unit is checked with `systemd-analyze verify` (syntax, directives, the command
exists) and `systemd-analyze security --offline` (an exposure of at most 2.0 of 10,
"OK"), with its paths pointed at this checkout, and its command line is run with
`--check-config` under the unit's environment to prove the settings file parses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PIGEONHOLE = Path(sys.executable).with_name("pigeonhole")


def unit_here(tmp_path: Path) -> Path:
    """The unit with its ExecStart and settings path pointed at this checkout."""
    text = (DEPLOY / "pigeonhole.service").read_text()
    text = text.replace("/opt/pigeonhole/bin/pigeonhole", str(PIGEONHOLE))
    text = text.replace("/etc/pigeonhole/pigeonhole.toml", str(DEPLOY / "pigeonhole.toml"))
    unit = tmp_path / "pigeonhole.service"
    unit.write_text(text)
    return unit


def directives(unit: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.fixture
def analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    return path


def test_the_unit_verifies_and_is_hardened(analyze: str, tmp_path: Path) -> None:
    unit = unit_here(tmp_path)
    verify = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr
    security = subprocess.run(
        [analyze, "security", "--offline=yes", "--threshold=20", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert security.returncode == 0, security.stdout[-2000:]
    assert "Overall exposure level for pigeonhole.service: 1." in security.stdout
    # and a check that can fail: the same unit without its hardening is refused
    bare = tmp_path / "bare" / "pigeonhole.service"
    bare.parent.mkdir()
    bare.write_text(
        "\n".join(
            line
            for line in unit.read_text().splitlines()
            if line.startswith(("[", "ExecStart", "Description", "WantedBy", "Type"))
        )
    )
    loose = subprocess.run(
        [analyze, "security", "--offline=yes", "--threshold=20", str(bare)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loose.returncode != 0


def test_the_units_command_reads_the_example_settings(tmp_path: Path) -> None:
    unit = unit_here(tmp_path)
    found = directives(unit)
    (command,) = found["ExecStart"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIGEONHOLE_")}
    for assignment in found["Environment"]:
        key, _, value = assignment.partition("=")
        env[key] = value
    result = subprocess.run(
        [*command.split(), "--check-config"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["data_dir"] == "/var/lib/pigeonhole" == found["WorkingDirectory"][0]
    assert (settings["host"], settings["port"], settings["blur_usage"]) == ("::", 4000, 3600)
    assert found["KillSignal"] == ["SIGTERM"]
    # `systemctl reload` sends SIGHUP, which serve takes as "read the settings again"
    assert found["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
