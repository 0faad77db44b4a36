"""The channel tables' writes, each row placed by creation order.

A nameplate or mailbox row's key is its rowid, given as it is inserted (one more than
the largest), and its sides and messages are keyed by that rowid: the rows of the
exchanges in flight sit together at the end of each table, and a batch writes a few pages
there whatever else is stored. Keyed by (app, name) or (app, mailbox id) instead, as
schema version 2 was, every new row landed on a random page among those of everything
alive; beside 15,000 waiting clients a commit wrote about five times the pages, and the
store helper's CPU per exchange grew by half (`bench/README.md`, "SQLite: rows in
creation order").

Where each live nameplate and mailbox is (key -> rowid) is kept here, read from the
tables when the store opens and changed with every write; a transaction that rolls back
puts it back as it was (`begin`, `rolled_back`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from pigeonhole.protocol import effects as fx
from pigeonhole.store import loading as L
from pigeonhole.store.bodies import stored_body

#: the rows `store/loading.py` reads, in its columns, from the tables keyed by rowid
LOAD_QUERIES = {
    "nameplates": f"SELECT {L.NAMEPLATE_COLUMNS} FROM nameplates",
    "nameplate_sides": "SELECT n.app_id, n.name, s.side, s.claimed, s.added"
    " FROM nameplate_sides s JOIN nameplates n ON n.rowid = s.nameplate",
    "mailboxes": f"SELECT {L.MAILBOX_COLUMNS} FROM mailboxes",
    "mailbox_sides": "SELECT m.app_id, m.id, s.side, s.opened, s.added, s.mood"
    " FROM mailbox_sides s JOIN mailboxes m ON m.rowid = s.mailbox",
}


def _key(app_id: str, name: str) -> str:
    return f"{app_id}\0{name}"


class ChannelRows:
    """The rowid of every live nameplate and mailbox, and the writes that use them."""

    def __init__(self) -> None:
        self.nameplates: dict[str, int] = {}
        self.mailboxes: dict[str, int] = {}
        #: (map, key, rowid before) for each change of the transaction under way
        self._undo: list[tuple[dict[str, int], str, int | None]] = []

    def read(self, db: sqlite3.Connection) -> None:
        """Where every stored nameplate and mailbox is (when the store opens)."""
        self.nameplates = {
            _key(a, n): rowid
            for rowid, a, n in db.execute("SELECT rowid, app_id, name FROM nameplates")
        }
        self.mailboxes = {
            _key(a, m): rowid
            for rowid, a, m in db.execute("SELECT rowid, app_id, id FROM mailboxes")
        }

    def begin(self) -> None:
        self._undo.clear()

    def rolled_back(self) -> None:
        """The transaction was rolled back: every change it made to the maps is undone."""
        for places, key, before in reversed(self._undo):
            if before is None:
                places.pop(key, None)
            else:
                places[key] = before
        self._undo.clear()

    def _set(self, places: dict[str, int], key: str, rowid: int | None) -> None:
        self._undo.append((places, key, places.get(key)))
        if rowid is None:
            places.pop(key, None)
        else:
            places[key] = rowid

    def _parent(self, places: dict[str, int], key: str, what: str) -> int:
        rowid = places.get(key)
        if rowid is None:  # the core writes a row before its sides and messages
            raise ValueError(f"no {what} {key.replace(chr(0), ' ')!r} stored")
        return rowid

    # -- nameplates -------------------------------------------------------------------

    def _put(
        self,
        db: sqlite3.Connection,
        places: dict[str, int],
        key: str,
        update: tuple[str, tuple[Any, ...]],
        insert: tuple[str, tuple[Any, ...]],
    ) -> None:
        """Update the row where it is, or insert it (at the end) and note its rowid."""
        rowid = places.get(key)
        if rowid is not None:
            db.execute(update[0], (*update[1], rowid))
            return
        self._set(places, key, db.execute(*insert).lastrowid)

    def _delete(
        self, db: sqlite3.Connection, places: dict[str, int], key: str, children: tuple[str, ...]
    ) -> None:
        """Delete the row and what is keyed by its rowid in the `children` tables."""
        rowid = places.get(key)
        if rowid is None:
            return
        for statement in children:
            db.execute(statement, (rowid,))
        self._set(places, key, None)

    def put_nameplate(self, db: sqlite3.Connection, e: fx.PutNameplate) -> None:
        self._put(
            db,
            self.nameplates,
            _key(e.app_id, e.name),
            ("UPDATE nameplates SET mailbox_id=?, owner=? WHERE rowid=?", (e.mailbox_id, e.owner)),
            (
                "INSERT INTO nameplates (app_id, name, mailbox_id, owner) VALUES (?,?,?,?)",
                (e.app_id, e.name, e.mailbox_id, e.owner),
            ),
        )

    def delete_nameplate(self, db: sqlite3.Connection, e: fx.DeleteNameplate) -> None:
        self._delete(
            db,
            self.nameplates,
            _key(e.app_id, e.name),
            (
                "DELETE FROM nameplate_sides WHERE nameplate=?",
                "DELETE FROM nameplates WHERE rowid=?",
            ),
        )

    def put_nameplate_side(self, db: sqlite3.Connection, e: fx.PutNameplateSide) -> None:
        rowid = self._parent(self.nameplates, _key(e.app_id, e.name), "nameplate")
        db.execute(
            "INSERT OR REPLACE INTO nameplate_sides (nameplate, side, claimed, added)"
            " VALUES (?,?,?,?)",
            (rowid, e.side, int(e.claimed), e.added),
        )

    # -- mailboxes and messages -------------------------------------------------------

    def put_mailbox(self, db: sqlite3.Connection, e: fx.PutMailbox) -> None:
        self._put(
            db,
            self.mailboxes,
            _key(e.app_id, e.mailbox_id),
            (
                "UPDATE mailboxes SET for_nameplate=?, created=?, owner=? WHERE rowid=?",
                (int(e.for_nameplate), e.created, e.owner),
            ),
            (
                "INSERT INTO mailboxes (app_id, id, for_nameplate, created, owner)"
                " VALUES (?,?,?,?,?)",
                (e.app_id, e.mailbox_id, int(e.for_nameplate), e.created, e.owner),
            ),
        )

    def delete_mailbox(self, db: sqlite3.Connection, e: fx.DeleteMailbox) -> None:
        self._delete(
            db,
            self.mailboxes,
            _key(e.app_id, e.mailbox_id),
            (
                "DELETE FROM messages WHERE mailbox=?",
                "DELETE FROM mailbox_sides WHERE mailbox=?",
                "DELETE FROM mailboxes WHERE rowid=?",
            ),
        )

    def put_mailbox_side(self, db: sqlite3.Connection, e: fx.PutMailboxSide) -> None:
        rowid = self._parent(self.mailboxes, _key(e.app_id, e.mailbox_id), "mailbox")
        db.execute(
            "INSERT OR REPLACE INTO mailbox_sides (mailbox, side, opened, added, mood)"
            " VALUES (?,?,?,?,?)",
            (rowid, e.side, int(e.opened), e.added, e.mood),
        )

    def put_message(self, db: sqlite3.Connection, e: fx.PutMessage) -> None:
        rowid = self._parent(self.mailboxes, _key(e.app_id, e.mailbox_id), "mailbox")
        db.execute(
            "INSERT OR REPLACE INTO messages"
            " (seq, mailbox, app_id, mailbox_id, side, phase, body, server_rx, msg_id, owner)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                e.seq,
                rowid,
                e.app_id,
                e.mailbox_id,
                e.side,
                e.phase,
                stored_body(e.body),
                e.server_rx,
                orjson.dumps(e.msg_id),
                e.owner,
            ),
        )

    def writers(self) -> dict[type, Any]:
        """The channel effects' writers, by effect type."""
        return {
            fx.PutNameplate: self.put_nameplate,
            fx.DeleteNameplate: self.delete_nameplate,
            fx.PutNameplateSide: self.put_nameplate_side,
            fx.PutMailbox: self.put_mailbox,
            fx.DeleteMailbox: self.delete_mailbox,
            fx.PutMailboxSide: self.put_mailbox_side,
            fx.PutMessage: self.put_message,
        }
