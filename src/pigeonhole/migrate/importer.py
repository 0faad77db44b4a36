"""`import-reference`: a new data directory from the reference server's databases.

Everything is checked before anything is written: both reference files must be
databases this module understands (migrate/reference.py), and the target must not hold
Pigeonhole state already. The new databases are built with Pigeonhole's own schema in
a staging directory beside the target, each in one transaction, synced, and only then
moved into place; a failure at any point removes the staging directory and leaves the
target as it was. The reference's files are only ever opened read-only.

What carries over: every live nameplate, mailbox, side (claimed, opened, mood) and
message (bodies converted to bytes as the server stores them, message ids and arrival
order kept), so a client that was waiting finishes once it reconnects; every usage row,
with the reference's row ids as ours, and its `current` row; with the reference transit
relay's usage database too, every relay record becomes a `transit` row (its row id ours).
Channels get the grace period every restart gives: their expiry starts when
`pigeonhole serve` starts.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pigeonhole.durable import fsync_path
from pigeonhole.migrate import reference as ref
from pigeonhole.store.bodies import stored_body
from pigeonhole.store.sqlite import CHANNEL_VERSION, USAGE_VERSION
from pigeonhole.store.sqlite.migrations import create_or_check

#: the files of a data directory that hold server state
STATE_FILES = ("channel.sqlite", "usage.sqlite")


class ImportRefused(Exception):
    """The import was refused; nothing was written."""


@dataclass
class ImportSummary:
    """What was imported, table by table, and what could not carry over."""

    channel_version: int
    usage_version: int | None
    rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)


def check_target(data_dir: Path) -> None:
    """Refuse a data directory that already holds Pigeonhole state (or is not a directory)."""
    if data_dir.exists() and not data_dir.is_dir():
        raise ImportRefused(f"{data_dir} exists and is not a directory")
    held = [
        name
        for name in STATE_FILES
        for suffix in ("", "-wal")
        if (data_dir / f"{name}{suffix}").exists()
    ]
    if held:
        raise ImportRefused(
            f"{data_dir} already holds server state ({', '.join(sorted(set(held)))}); "
            "import into a new data directory, or move this one aside first"
        )


def import_reference(
    channel_db: Path,
    usage_db: Path | None,
    data_dir: Path,
    clock: Callable[[], float] = time.time,
    transit_usage_db: Path | None = None,
) -> ImportSummary:
    """Build DATA_DIR's databases from the reference's; raise ImportRefused before writing.

    `transit_usage_db`: the reference transit relay's usage database, if it kept one.
    """
    channel = _open(ref.open_channel, channel_db)
    usage = transit = None
    try:
        if usage_db is not None:
            usage = _open(ref.open_usage, usage_db)
        if transit_usage_db is not None:
            transit = _open(ref.open_transit_usage, transit_usage_db)
        check_target(data_dir)
        summary = ImportSummary(channel.version, usage.version if usage else None)
        staging = data_dir.parent / f".{data_dir.name}.import-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir(parents=True)
            _import_channel(channel, staging / "channel.sqlite", clock(), summary)
            create_or_check(staging / "usage.sqlite", "usage", USAGE_VERSION)
            if usage is not None:
                _import_usage(usage, staging / "usage.sqlite", summary)
            if transit is not None:
                _import_transit(transit, staging / "usage.sqlite", summary)
            _publish(staging, data_dir)
        except sqlite3.Error as err:
            raise ImportRefused(f"reading the reference failed, nothing imported: {err}") from err
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return summary
    finally:
        channel.close()
        for opened in (usage, transit):
            if opened is not None:
                opened.close()


def _open(opener: Callable[[Path], ref.Opened], path: Path) -> ref.Opened:
    try:
        return opener(path)
    except ref.ReferenceError as err:
        raise ImportRefused(str(err)) from err
    except sqlite3.Error as err:
        raise ImportRefused(f"{path}: cannot be read: {err}") from err


def _writer(path: Path, name: str, version: int) -> sqlite3.Connection:
    create_or_check(path, name, version)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    return db


def _import_channel(opened: ref.Opened, path: Path, now: float, summary: ImportSummary) -> None:
    opened.con.execute("BEGIN")  # one snapshot of the reference
    rows = ref.channel_rows(opened, now)
    db = _writer(path, "channel", CHANNEL_VERSION)
    try:
        db.executemany(
            "INSERT INTO nameplates (app_id, name, mailbox_id, owner) VALUES (?,?,?,NULL)",
            rows.nameplates,
        )
        # sides and messages are keyed by their nameplate's or mailbox's rowid (schema v3)
        plates = {(a, n): r for r, a, n in db.execute("SELECT rowid, app_id, name FROM nameplates")}
        db.executemany(
            "INSERT INTO nameplate_sides (nameplate, side, claimed, added) VALUES (?,?,?,?)",
            [(plates[(a, n)], side, c, t) for a, n, side, c, t in rows.nameplate_sides],
        )
        in_order = sorted(rows.mailboxes, key=lambda m: m[3])  # by creation time
        db.executemany(
            "INSERT INTO mailboxes (app_id, id, for_nameplate, created, owner)"
            " VALUES (?,?,?,?,NULL)",
            in_order,
        )
        boxes = {(a, m): r for r, a, m in db.execute("SELECT rowid, app_id, id FROM mailboxes")}
        db.executemany(
            "INSERT INTO mailbox_sides (mailbox, side, opened, added, mood) VALUES (?,?,?,?,?)",
            [(boxes[(a, m)], side, o, t, mood) for a, m, side, o, t, mood in rows.mailbox_sides],
        )
        live = {(app_id, mailbox_id) for app_id, mailbox_id, _, _ in rows.mailboxes}
        messages = 0
        for seq, (app_id, mailbox_id, side, phase, body, server_rx, msg_id) in enumerate(
            ref.message_rows(opened, live), start=1
        ):
            db.execute(
                "INSERT INTO messages (seq, mailbox, app_id, mailbox_id, side, phase, body,"
                " server_rx, msg_id, owner) VALUES (?,?,?,?,?,?,?,?,?,NULL)",
                (
                    seq,
                    boxes[(app_id, mailbox_id)],
                    app_id,
                    mailbox_id,
                    side,
                    phase,
                    _body(body),
                    server_rx,
                    msg_id,
                ),
            )
            messages = seq
        db.execute("COMMIT")
    finally:
        db.close()
    (total,) = opened.con.execute("SELECT count(*) FROM messages").fetchone()
    opened.con.execute("COMMIT")
    summary.rows.update(
        nameplates=len(rows.nameplates),
        nameplate_sides=len(rows.nameplate_sides),
        mailboxes=len(rows.mailboxes),
        mailbox_sides=len(rows.mailbox_sides),
        messages=messages,
    )
    summary.skipped.update(rows.skipped)
    if total > messages:
        summary.skipped["messages of mailboxes that no longer exist"] = total - messages


def _body(hex_body: str) -> bytes | str:
    """As the server stores an `add` body; a body that is not hex stays text, verbatim."""
    try:
        return stored_body(hex_body)
    except ValueError:
        return hex_body


def _import_usage(opened: ref.Opened, path: Path, summary: ImportSummary) -> None:
    opened.con.execute("BEGIN")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        columns = {
            "nameplates": "id, app_id, started, waiting_time, total_time, result",
            "mailboxes": "id, app_id, for_nameplate, started, waiting_time, total_time, result",
            "client_versions": "id, app_id, side, connect_time, implementation, version",
        }
        for table in ref.usage_tables(opened):
            marks = ",".join("?" * len(columns[table].split(",")))
            cursor = opened.con.execute(ref.usage_query(table, paged=False))
            count = 0
            while batch := cursor.fetchmany(10_000):
                db.executemany(f"INSERT INTO {table} ({columns[table]}) VALUES ({marks})", batch)
                count += len(batch)
            summary.rows[f"usage {table}"] = count
        current = opened.con.execute(ref.CURRENT_QUERY).fetchone()
        if current is not None:
            db.execute(
                "INSERT INTO current (rebooted, updated, blur_time, connections) VALUES (?,?,?,?)",
                current,
            )
        db.execute("COMMIT")
    finally:
        db.close()
    for table, count in ref.skipped_usage_rows(opened).items():
        summary.skipped[f"usage {table} rows missing a required value"] = count
    opened.con.execute("COMMIT")


def _import_transit(opened: ref.Opened, path: Path, summary: ImportSummary) -> None:
    """The relay's usage rows into our `transit` table, in one transaction."""
    opened.con.execute("BEGIN")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        cursor = opened.con.execute(ref.transit_query(paged=False))
        count = 0
        while batch := cursor.fetchmany(10_000):
            db.executemany(
                "INSERT INTO transit (id, started, total_time, waiting_time, total_bytes, result)"
                " VALUES (?,?,?,?,?,?)",
                batch,
            )
            count += len(batch)
        summary.rows["usage transit"] = count
        db.execute("COMMIT")
    finally:
        db.close()
    skipped = ref.skipped_transit_rows(opened)
    if skipped:
        summary.skipped["transit relay usage rows missing a required value"] = skipped
    opened.con.execute("COMMIT")


def _publish(staging: Path, data_dir: Path) -> None:
    """Sync the new files and move them into DATA_DIR (made if missing)."""
    for name in STATE_FILES:
        fsync_path(staging / name)
    check_target(data_dir)  # still free: nothing else wrote state meanwhile
    if not data_dir.exists():
        os.replace(staging, data_dir)
    else:
        for name in STATE_FILES:
            os.replace(staging / name, data_dir / name)
    fsync_path(data_dir)
    fsync_path(data_dir.parent)
