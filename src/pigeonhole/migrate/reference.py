"""Reading the reference server's databases (magic-wormhole-mailbox-server), read-only.

The reference keeps two SQLite files (reference-behaviour.md, section 4): a channel
database (`relay.sqlite`; schema v1, or v2 which adds address-id and connection tables)
and an optional usage database (`usage.sqlite`; v1, or v2 which adds `client_versions`).
This module opens them through `file:...?mode=ro` URIs, so nothing here can change them
and a running reference is never blocked, checks that they are what it expects, and
turns their rows into Pigeonhole's: one mapping, used by `import-reference` and by
`export-usage --reference-usage-db`. The reference transit relay's usage database
(magic-wormhole-transit-relay 0.5.0, `--usage-db`, schema v1) is read the same way: its
`usage` rows become our `transit` rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


class ReferenceError(Exception):
    """The file is not a reference database this version understands."""


#: the tables (and their columns) each reference schema version must have
CHANNEL_TABLES: Mapping[str, frozenset[str]] = {
    "nameplates": frozenset({"id", "app_id", "name", "mailbox_id", "request_id"}),
    "nameplate_sides": frozenset({"nameplates_id", "claimed", "side", "added"}),
    "mailboxes": frozenset({"app_id", "id", "updated", "for_nameplate"}),
    "mailbox_sides": frozenset({"mailbox_id", "opened", "side", "added", "mood"}),
    "messages": frozenset({"app_id", "mailbox_id", "side", "phase", "body", "server_rx", "msg_id"}),
}
#: v2 adds these (address ids and live connections: nothing that outlives a restart)
CHANNEL_V2_TABLES = frozenset({"addrid_generation", "connections", "connection_messages"})
USAGE_TABLES: Mapping[str, frozenset[str]] = {
    "current": frozenset({"rebooted", "updated", "blur_time", "connections_websocket"}),
    "nameplates": frozenset({"app_id", "started", "waiting_time", "total_time", "result"}),
    "mailboxes": frozenset(
        {"app_id", "for_nameplate", "started", "total_time", "waiting_time", "result"}
    ),
}
USAGE_V2_TABLES: Mapping[str, frozenset[str]] = {
    "client_versions": frozenset({"app_id", "side", "connect_time", "implementation", "version"}),
}

#: Pigeonhole usage rows from the reference's, keyed by our table: the SELECT list in
#: our column order. A reference row's `rowid` becomes our `id`: it only grows (the
#: reference never deletes usage rows), so it serves as the export cursor unchanged.
#: Rows missing a value our schema requires (never written by the reference's code) are
#: left out, and counted by `skipped_usage_rows`.
USAGE_SELECTS: Mapping[str, tuple[str, str]] = {
    "nameplates": (
        "rowid, COALESCE(app_id, ''), started, waiting_time, total_time, result",
        "started IS NOT NULL AND total_time IS NOT NULL AND result IS NOT NULL",
    ),
    "mailboxes": (
        "rowid, COALESCE(app_id, ''), COALESCE(for_nameplate, 0), started, waiting_time,"
        " total_time, result",
        "started IS NOT NULL AND total_time IS NOT NULL AND result IS NOT NULL",
    ),
    "client_versions": (
        "rowid, COALESCE(app_id, ''), COALESCE(side, ''), connect_time, implementation, version",
        "connect_time IS NOT NULL",
    ),
}


#: the reference transit relay's usage database, schema v1 (`current` is a live gauge
#: of that process: nothing to carry over)
TRANSIT_TABLES: Mapping[str, frozenset[str]] = {
    "usage": frozenset({"started", "total_time", "waiting_time", "total_bytes", "result"}),
}
#: our `transit` columns from the relay's `usage` rows (its rowid as our id, as above)
TRANSIT_SELECT = (
    "rowid, started, total_time, waiting_time, COALESCE(total_bytes, 0), result",
    "started IS NOT NULL AND total_time IS NOT NULL AND result IS NOT NULL",
)


@dataclass(frozen=True)
class Opened:
    """A reference database opened read-only, and the schema version found in it."""

    con: sqlite3.Connection
    version: int

    def close(self) -> None:
        self.con.close()


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection; a missing file is refused (never created)."""
    if not path.is_file():
        raise ReferenceError(f"{path}: no such file")
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    con.isolation_level = None
    return con


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info(`{table}`)")}


def _check(
    path: Path,
    kind: str,
    versions: Mapping[int, Mapping[str, frozenset[str]]],
) -> Opened:
    con = open_read_only(path)
    try:
        try:
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as err:
            raise ReferenceError(f"{path}: not a SQLite database ({err})") from err
        (integrity,) = con.execute("PRAGMA quick_check").fetchone()
        if integrity != "ok":
            raise ReferenceError(f"{path}: the database is damaged: {integrity}")
        if "version" not in tables:
            raise ReferenceError(
                f"{path}: not a reference {kind} database (it has no `version` table)"
            )
        row = con.execute("SELECT version FROM version").fetchone()
        version = row[0] if row is not None else None
        if not isinstance(version, int) or version not in versions:
            known = " or ".join(f"v{v}" for v in versions)
            raise ReferenceError(
                f"{path}: reference {kind} database version {version!r} is not one"
                f" Pigeonhole reads ({known})"
            )
        for table, needed in versions[version].items():
            missing = needed - _columns(con, table)
            if missing:
                raise ReferenceError(
                    f"{path}: not a reference {kind} database v{version}: table `{table}`"
                    f" lacks {', '.join(sorted(missing))}"
                )
    except BaseException:
        con.close()
        raise
    return Opened(con, version)


def open_channel(path: Path) -> Opened:
    """The reference's channel database (`relay.sqlite`), v1 or v2, checked."""
    v2 = {**CHANNEL_TABLES, **{t: frozenset() for t in CHANNEL_V2_TABLES}}
    return _check(path, "channel", {1: CHANNEL_TABLES, 2: v2})


def open_usage(path: Path) -> Opened:
    """The reference's usage database (`usage.sqlite`), v1 or v2, checked."""
    return _check(path, "usage", {1: USAGE_TABLES, 2: {**USAGE_TABLES, **USAGE_V2_TABLES}})


def open_transit_usage(path: Path) -> Opened:
    """The reference transit relay's usage database (its `--usage-db`), v1, checked."""
    return _check(path, "transit relay usage", {1: TRANSIT_TABLES})


def transit_query(paged: bool) -> str:
    """SELECT of our `transit` columns from the relay's `usage` table (paged as above)."""
    columns, valid = TRANSIT_SELECT
    where = f"{valid} AND rowid > ? AND rowid <= ?" if paged else valid
    limit = " LIMIT ?" if paged else ""
    return f"SELECT {columns} FROM `usage` WHERE {where} ORDER BY rowid{limit}"


def skipped_transit_rows(opened: Opened) -> int:
    """The relay's usage rows left out because a required value is NULL."""
    (count,) = opened.con.execute(
        f"SELECT count(*) FROM `usage` WHERE NOT ({TRANSIT_SELECT[1]})"
    ).fetchone()
    return int(count)


def usage_tables(opened: Opened) -> list[str]:
    """Our usage tables that this reference database has rows for (by its version)."""
    return [t for t in USAGE_SELECTS if t != "client_versions" or opened.version >= 2]


def usage_query(table: str, paged: bool) -> str:
    """SELECT of our `table`'s columns from the reference; paged: rows after an id, up
    to a last id, at most a number of them (`rowid > ? AND rowid <= ? LIMIT ?`)."""
    columns, valid = USAGE_SELECTS[table]
    where = f"{valid} AND rowid > ? AND rowid <= ?" if paged else valid
    limit = " LIMIT ?" if paged else ""
    return f"SELECT {columns} FROM `{table}` WHERE {where} ORDER BY rowid{limit}"


def skipped_usage_rows(opened: Opened) -> dict[str, int]:
    """Rows of each usage table left out because a required value is NULL."""
    skipped = {}
    for table in usage_tables(opened):
        _, valid = USAGE_SELECTS[table]
        (count,) = opened.con.execute(
            f"SELECT count(*) FROM `{table}` WHERE NOT ({valid})"
        ).fetchone()
        if count:
            skipped[table] = int(count)
    return skipped


#: our `current` columns (rebooted, updated, blur_time, connections) from the reference's
CURRENT_QUERY = (
    "SELECT rebooted, updated, blur_time, COALESCE(connections_websocket, 0) FROM `current`"
    " WHERE rebooted IS NOT NULL AND updated IS NOT NULL"
)


# -- channel rows ---------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelRows:
    """The live state of a reference channel database, in Pigeonhole's row shapes."""

    #: (app_id, name, mailbox_id)
    nameplates: list[tuple[str, str, str]]
    #: (app_id, name, side, claimed, added)
    nameplate_sides: list[tuple[str, str, str, int, float]]
    #: (app_id, id, for_nameplate, created)
    mailboxes: list[tuple[str, str, int, float]]
    #: (app_id, mailbox_id, side, opened, added, mood)
    mailbox_sides: list[tuple[str, str, str, int, float, str | None]]
    #: what could not carry over, by reason: rows count
    skipped: dict[str, int]


def channel_rows(opened: Opened, now: float) -> ChannelRows:
    """Nameplates, mailboxes and their sides (messages: `message_rows`, streamed)."""
    con = opened.con
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    mailboxes: dict[str, tuple[str, int, float]] = {}  # id -> (app_id, for_nameplate, updated)
    for app_id, mailbox_id, updated, for_nameplate in con.execute(
        "SELECT app_id, id, updated, for_nameplate FROM mailboxes"
    ):
        if app_id is None or mailbox_id is None:
            skip("mailboxes without an app or id")
            continue
        mailboxes[mailbox_id] = (app_id, int(bool(for_nameplate)), _time(updated, now))
    sides: list[tuple[str, str, str, int, float, str | None]] = []
    first_added: dict[str, float] = {}
    for mailbox_id, opened_flag, side, added, mood in con.execute(
        "SELECT mailbox_id, opened, side, added, mood FROM mailbox_sides ORDER BY rowid"
    ):
        box = mailboxes.get(mailbox_id)
        if box is None or side is None:
            skip("mailbox sides without their mailbox")
            continue
        when = _time(added, now)
        first_added[mailbox_id] = min(first_added.get(mailbox_id, when), when)
        sides.append((box[0], mailbox_id, side, int(bool(opened_flag)), when, mood))
    plate_names: dict[int, tuple[str, str]] = {}
    seen: set[tuple[str, str]] = set()
    plates: list[tuple[str, str, str]] = []
    for rowid, app_id, name, mailbox_id in con.execute(
        "SELECT id, app_id, name, mailbox_id FROM nameplates ORDER BY id"
    ):
        if app_id is None or name is None or mailbox_id is None:
            skip("nameplates without an app, name or mailbox")
            continue
        if (app_id, name) in seen:
            skip("duplicate nameplates")
            continue
        seen.add((app_id, name))
        plate_names[rowid] = (app_id, name)
        plates.append((app_id, name, mailbox_id))
    plate_sides: list[tuple[str, str, str, int, float]] = []
    for plate_id, claimed, side, added in con.execute(
        "SELECT nameplates_id, claimed, side, added FROM nameplate_sides ORDER BY rowid"
    ):
        key = plate_names.get(plate_id)
        if key is None or side is None:
            skip("nameplate sides without their nameplate")
            continue
        plate_sides.append((key[0], key[1], side, int(bool(claimed)), _time(added, now)))
    return ChannelRows(
        nameplates=plates,
        nameplate_sides=_unique_sides(plate_sides, skip),
        mailboxes=[
            (app_id, mailbox_id, for_nameplate, first_added.get(mailbox_id, updated))
            for mailbox_id, (app_id, for_nameplate, updated) in mailboxes.items()
        ],
        mailbox_sides=_unique_sides(sides, skip),
        skipped=skipped,
    )


def _unique_sides(rows: list[Any], skip: Callable[[str], None]) -> list[Any]:
    """One row per (app, channel, side): the reference has no key; the last row wins."""
    unique: dict[tuple[Any, ...], Any] = {}
    for row in rows:
        key = tuple(row[:3])
        if key in unique:
            skip("repeated side rows")
        unique[key] = row
    return list(unique.values())


def message_rows(opened: Opened, mailboxes: set[tuple[str, str]]) -> Iterator[tuple[Any, ...]]:
    """(app_id, mailbox_id, side, phase, body hex, server_rx, msg_id JSON) in arrival order.

    Messages of mailboxes that no longer exist are left out (the caller counts them).
    """
    for app_id, mailbox_id, side, phase, body, server_rx, msg_id in opened.con.execute(
        "SELECT app_id, mailbox_id, side, phase, body, server_rx, msg_id FROM messages"
        " ORDER BY rowid"
    ):
        if (app_id, mailbox_id) not in mailboxes or side is None or phase is None:
            continue
        yield (
            app_id,
            mailbox_id,
            side,
            str(phase),
            "" if body is None else str(body),
            float(server_rx or 0.0),
            orjson.dumps(msg_id).decode(),
        )


def _time(value: object, now: float) -> float:
    """The reference's times are floats in INTEGER columns; a missing one is `now`."""
    return float(value) if isinstance(value, int | float) else now
