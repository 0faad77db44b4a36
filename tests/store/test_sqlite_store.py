"""The SQLite store: round trip through a real file, rollback on any failure, versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.store.migrations import DatabaseError
from pigeonhole.store.sqlite import SqliteStore, StoreError


def _rz() -> Rendezvous:
    return Rendezvous(Randomness(lambda xs: xs[0], lambda n: 0, lambda: "m" * 13))


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "channel.sqlite", tmp_path / "usage.sqlite")
    s.open()
    yield s  # type: ignore[misc]
    s.close()


def test_state_survives_reopen(store: SqliteStore, tmp_path: Path) -> None:
    """Everything a channel needs comes back after closing and reopening the files."""
    rz, out = _rz(), []  # type: ignore[var-annotated]
    mailbox_id = rz.claim("app", "7", "a", 10.0, out)
    rz.claim("app", "7", "b", 11.0, out)
    mailbox = rz.mailbox("app", mailbox_id)
    assert mailbox is not None
    from pigeonhole.protocol.channels import Message

    rz.add(mailbox, "app", Message("a", "pake", "abcd", 12.0, {"x": [1]}), out)
    rz.release("app", "7", "a", 13.0, out)
    store.write(out)
    store.close()
    again = SqliteStore(tmp_path / "channel.sqlite", tmp_path / "usage.sqlite")
    again.open()
    loaded = _rz()
    again.load(loaded, 500.0)
    app = loaded.apps["app"]
    assert app.nameplates["7"].mailbox_id == mailbox_id
    assert {s: v.claimed for s, v in app.nameplates["7"].sides.items()} == {"a": False, "b": True}
    box = app.mailboxes[mailbox_id]
    assert [(m.side, m.phase, m.body, m.msg_id) for m in box.messages] == [
        ("a", "pake", "abcd", {"x": [1]})
    ]
    assert box.size == 2 and box.updated == 500.0  # fresh expiry window after a restart
    again.close()


def test_failed_transaction_leaves_nothing(store: SqliteStore) -> None:
    """Any failure mid-transaction (here: an id orjson cannot encode) rolls back all of it."""
    deep: object = []
    for _ in range(300):
        deep = [deep]
    bad = [
        fx.PutMailbox("app", "m1", False, 1.0),
        fx.PutMessage("app", "m1", "a", "p", "aa", 1.0, deep),
    ]
    with pytest.raises(StoreError):
        store.write(bad)
    assert store.db.execute("SELECT count(*) FROM mailboxes").fetchone() == (0,)
    store.write([fx.PutMailbox("app", "m2", False, 2.0)])  # the store still works
    assert store.db.execute("SELECT id FROM mailboxes").fetchall() == [("m2",)]


def test_usage_rows_land_in_the_usage_file(store: SqliteStore, tmp_path: Path) -> None:
    """Usage effects are written to usage.sqlite, readable by another connection."""
    store.write([fx.UsageMailbox("app", True, 100.0, 2.0, 9.0, "happy")])
    reader = sqlite3.connect(f"file:{tmp_path / 'usage.sqlite'}?mode=ro", uri=True)
    rows = reader.execute("SELECT app_id, result, waiting_time FROM mailboxes").fetchall()
    assert rows == [("app", "happy", 2.0)]
    reader.close()


def test_unknown_version_is_refused(tmp_path: Path) -> None:
    """A database of another schema version is refused with a clear error."""
    path = tmp_path / "channel.sqlite"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE version (version INTEGER); INSERT INTO version VALUES (9);")
    db.close()
    with pytest.raises(DatabaseError, match="unable to handle db version 9"):
        SqliteStore(path, tmp_path / "usage.sqlite").open()


def test_not_a_database_is_refused(tmp_path: Path) -> None:
    """A file that is not SQLite is refused, not overwritten."""
    path = tmp_path / "channel.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DatabaseError):
        SqliteStore(path, tmp_path / "usage.sqlite").open()
    assert path.read_bytes().startswith(b"this is not sqlite")
