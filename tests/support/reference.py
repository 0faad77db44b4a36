"""The reference mailbox server (magic-wormhole-mailbox-server 0.8.0) as a subprocess.

`scripts/setup --test` installs it into the project's venv (`twist wormhole-mailbox`).
It listens on 127.0.0.1 only, keeps its databases where the test says, and is stopped
by its PID (SIGTERM, as systemd stops it).
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import Service, accepts_tcp, free_port

TWIST = Path(sys.executable).parent / "twist"
REFERENCE_SCHEMAS = "wormhole_mailbox_server/db-schemas"


def reference_schema(name: str) -> str:
    """One of the reference's own schema files, from the installed package."""
    import wormhole_mailbox_server  # type: ignore[import-untyped]

    return (Path(wormhole_mailbox_server.__file__).parent / "db-schemas" / name).read_text()


def reference_database(
    path: Path, schema: str, version: int, sql: str = "", rows: Sequence[tuple[Any, ...]] = ()
) -> Path:
    """A database made with one of the reference's schema files, holding `version` and,
    if given, `rows` inserted with `sql`."""
    con = sqlite3.connect(path)
    try:
        con.executescript(reference_schema(schema))
        con.execute("INSERT INTO version (version) VALUES (?)", (version,))
        if sql:
            con.executemany(sql, rows)
        con.commit()
    finally:
        con.close()
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ReferenceServer(Service):
    """`twist wormhole-mailbox` with `channel_db` and `usage_db` in `workdir`."""

    start_timeout = 30.0

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        if not TWIST.exists():
            pytest.skip("the reference server is not installed (scripts/setup --test does it)")
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.channel_db = workdir / "relay.sqlite"
        self.usage_db = workdir / "usage.sqlite"
        self.log_path = workdir / "reference.log"
        super().__init__(
            [
                str(TWIST),
                "--log-format=text",
                f"--log-file={self.log_path}",
                "wormhole-mailbox",
                f"--port=tcp:{self.port}:interface=127.0.0.1",
                f"--channel-db={self.channel_db}",
                f"--usage-db={self.usage_db}",
            ],
            workdir / "reference.out",
            lambda: accepts_tcp(self.port),
            cwd=workdir,
            name="the reference",
        )

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1"

    def log_text(self) -> str:
        """Its stdout and stderr, then its own log file."""
        try:
            own = self.log_path.read_text(errors="replace")
        except OSError:
            own = ""
        return super().log_text() + own
