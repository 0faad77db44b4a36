"""Usage databases for tests, made from the server's contract files usage-v1.sql and -v2.sql."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SRC = Path(__file__).parents[2] / "src" / "pigeonhole"
SCHEMA_DIR = SRC / "store" / "sqlite" / "schema"
SCHEMA_SQL = SCHEMA_DIR / "usage-v1.sql"


def create_usage_db(path: Path, version: int = 1) -> sqlite3.Connection:
    """A usage database made from the contract file, in WAL mode as the server opens it."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript((SCHEMA_DIR / f"usage-v{version}.sql").read_text())
    con.commit()
    return con


def add_mailbox(
    con: sqlite3.Connection,
    app_id: str,
    started: float,
    waiting: float | None,
    total: float,
    result: str,
    for_nameplate: bool = True,
) -> None:
    con.execute(
        "INSERT INTO mailboxes (app_id, for_nameplate, started, waiting_time, total_time, result)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (app_id, int(for_nameplate), started, waiting, total, result),
    )
    con.commit()


def add_nameplate(
    con: sqlite3.Connection,
    app_id: str,
    started: float,
    waiting: float | None,
    total: float,
    result: str,
) -> None:
    con.execute(
        "INSERT INTO nameplates (app_id, started, waiting_time, total_time, result)"
        " VALUES (?, ?, ?, ?, ?)",
        (app_id, started, waiting, total, result),
    )
    con.commit()


def add_client(
    con: sqlite3.Connection,
    app_id: str,
    side: str,
    when: float,
    implementation: str | None,
    version: str | None,
) -> None:
    con.execute(
        "INSERT INTO client_versions (app_id, side, connect_time, implementation, version)"
        " VALUES (?, ?, ?, ?, ?)",
        (app_id, side, when, implementation, version),
    )
    con.commit()


def add_sample(con: sqlite3.Connection, when: float, connections: int, mailboxes: int) -> None:
    con.execute(
        "INSERT INTO connection_counts (sampled, connections, bound, subscribed, nameplates,"
        " mailboxes) VALUES (?, ?, ?, ?, ?, ?)",
        (when, connections, connections, mailboxes, mailboxes, mailboxes),
    )
    con.execute("DELETE FROM current")
    con.execute(
        "INSERT INTO current (rebooted, updated, blur_time, connections) VALUES (?, ?, NULL, ?)",
        (when - 3600, when, connections),
    )
    con.commit()


def add_transit(
    con: sqlite3.Connection,
    started: float,
    total: float,
    waiting: float | None,
    total_bytes: int,
    result: str,
) -> None:
    """One transit relay record (a usage database of version 2)."""
    con.execute(
        "INSERT INTO transit (started, total_time, waiting_time, total_bytes, result)"
        " VALUES (?, ?, ?, ?, ?)",
        (started, total, waiting, total_bytes, result),
    )
    con.commit()
