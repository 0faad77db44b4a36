"""The servers the interop clients talk to, each a subprocess stopped by its PID:

- `Server`: `python -m pigeonhole serve` on a free 127.0.0.1 port and a data dir,
  restartable on the same port and dir, stopped by PID with SIGTERM or SIGKILL;
  `wait_for_pake` waits until it (or the reference) has stored a side's PAKE message.
- `TransitRelay`: `twist transitrelay` on a free 127.0.0.1 port; `relay_records` reads
  a relay's usage records.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from tests.support.process import (
    BIN,
    InteropError,
    ServeProcess,
    Service,
    accepts_tcp,
    free_port,
)

TWIST = BIN / "twist"


class Server(ServeProcess):
    """`python -m pigeonhole serve` as a subprocess; restartable on the same port/dir."""

    def __init__(
        self, data_dir: Path, log_path: Path, port: int | None = None, args: Sequence[str] = ()
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        #: the PostgreSQL URL of `--store`, or None (SQLite files in `data_dir`)
        self.store = args[list(args).index("--store") + 1] if "--store" in args else None
        super().__init__(
            log_path,
            "--host",
            "127.0.0.1",
            "--data-dir",
            str(data_dir),
            *args,  # more `serve` options (for example `--store postgresql://...`)
            port=port,
        )


#: PAKE messages stored in the mailbox a nameplate points at: the same tables and columns
#: in Pigeonhole's SQLite and PostgreSQL stores and in the reference's channel database
PAKE_POSTED = (
    "SELECT count(*) FROM {nameplates} n JOIN {messages} m"
    " ON m.app_id = n.app_id AND m.mailbox_id = n.mailbox_id"
    " WHERE n.name = {name} AND m.phase = 'pake'"
)


def pake_posted(server: Any, nameplate: str) -> int:
    """PAKE messages `server` has stored for `nameplate` (a side that has claimed it,
    opened its mailbox and sent its first message): a Pigeonhole `Server` on SQLite or
    PostgreSQL, or the reference (`channel_db`). Read in a fresh connection."""
    if isinstance(server, Server) and server.store is not None:
        from tests.support.postgres import run

        url = server.store

        async def count() -> int:
            import asyncpg  # type: ignore[import-untyped]

            conn = await asyncpg.connect(url)
            try:
                query = PAKE_POSTED.format(
                    nameplates="channel.nameplates", messages="channel.messages", name="$1"
                )
                return int(await conn.fetchval(query, nameplate))
            finally:
                await conn.close()

        return run(count)
    path = server.data_dir / "channel.sqlite" if isinstance(server, Server) else server.channel_db
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        query = PAKE_POSTED.format(nameplates="nameplates", messages="messages", name="?")
        return int(db.execute(query, (nameplate,)).fetchone()[0])


def wait_for_pake(server: Any, codes: Sequence[str], timeout: float = 30.0) -> None:
    """Wait until `server` has stored a PAKE message for the nameplate of every code: its
    sides wait (claimed, mailbox open, first message durable)."""
    deadline = time.monotonic() + timeout
    for code in codes:
        nameplate = code.split("-", 1)[0]
        while not pake_posted(server, nameplate):
            if time.monotonic() > deadline:
                raise InteropError(f"no PAKE message stored for {code} in {timeout:g} s")
            time.sleep(0.1)


class RelayPort(Protocol):
    """A transit relay listening on the host's 127.0.0.1 at `port`."""

    @property
    def port(self) -> int: ...


def relay_records(path: Path, table: str) -> list[dict[str, Any]]:
    """A relay's usage records in `table` of the SQLite file at `path`, oldest first, with
    the reference's keys (its `result` as `mood`)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT started, total_time, waiting_time, total_bytes, result"
            f" FROM {table} ORDER BY rowid"
        ).fetchall()
    keys = ("started", "total_time", "waiting_time", "total_bytes", "mood")
    return [dict(zip(keys, row, strict=True)) for row in rows]


class TransitRelay(Service):
    """`twist transitrelay` on a free 127.0.0.1 port (its usage database in `workdir`
    when `usage` is true)."""

    def __init__(self, workdir: Path, usage: bool = False) -> None:
        self.port = free_port()
        self.log_path = workdir / "transit-relay.log"
        self.usage_db = workdir / "transit-usage.sqlite" if usage else None
        usage_args = [] if self.usage_db is None else [f"--usage-db={self.usage_db}"]
        super().__init__(
            [
                str(TWIST),
                "--log-format=text",
                f"--log-file={self.log_path}",
                "transitrelay",
                f"--port=tcp:{self.port}:interface=127.0.0.1",
                *usage_args,
            ],
            workdir / "transit-relay.out",
            lambda: accepts_tcp(self.port),
            cwd=workdir,
            name="transit relay",
        )
        self.start()

    def records(self) -> list[dict[str, Any]]:
        """Its usage records, oldest first (its database's `usage` table)."""
        assert self.usage_db is not None, "started without a usage database"
        return relay_records(self.usage_db, "usage") if self.usage_db.exists() else []

    def close(self) -> None:
        self.stop(timeout=10)
