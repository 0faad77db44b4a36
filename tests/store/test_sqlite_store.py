"""The SQLite store: round trip through a real file, rollback on any failure, versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.store.errors import DatabaseError, StoreError
from pigeonhole.store.sqlite import BodyReader, SqliteStore
from pigeonhole.store.sqlite.migrations import schema_sql


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
    rz.add(mailbox, "app", "a", "pake", "abcd", 12.0, {"x": [1]}, out)
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
    assert [(m.side, m.phase, m.size, m.msg_id) for m in box.messages] == [
        ("a", "pake", 2, {"x": [1]})
    ]
    assert box.size == 2 and box.updated == 500.0  # fresh expiry window after a restart
    assert len(loaded.bodies) == 0  # bodies stay on disk: read when a replay needs them
    seq = box.messages[0].seq
    reader = BodyReader(tmp_path / "channel.sqlite")
    assert reader.read("app", mailbox_id, [seq]) == {seq: "abcd"}
    assert reader.read("app", "another", [seq]) == {}  # only that mailbox's messages
    reader.close()
    again.close()


def test_bodies_are_bytes_on_disk_and_owners_charge_again_after_a_restart(
    store: SqliteStore, tmp_path: Path
) -> None:
    rz, out = _rz(), []  # type: ignore[var-annotated]
    mailbox_id = rz.claim("app", "7", "a", 10.0, out, owner="192.0.2.7")
    mailbox = rz.mailbox("app", mailbox_id)
    assert mailbox is not None
    rz.add(mailbox, "app", "a", "0", "00ff" * 100, 11.0, 1, out, owner="192.0.2.7")
    rz.add(mailbox, "app", "a", "1", "ab", 12.0, 2, out, owner="198.51.100.1")
    store.write(out)
    body, typeof = store.db.execute(
        "SELECT body, typeof(body) FROM messages ORDER BY seq"
    ).fetchone()
    assert typeof == "blob" and body == bytes.fromhex("00ff" * 100)  # 200 bytes, not 400
    loaded = _rz()
    store.load(loaded, 20.0)
    ledger = loaded.ledger
    assert ledger.stored_bytes == 201
    assert dict(ledger.bytes_by) == {"192.0.2.7": 200, "198.51.100.1": 1}
    assert dict(ledger.nameplates_by) == {"192.0.2.7": 1}
    assert dict(ledger.mailboxes_by) == {"192.0.2.7": 1}
    assert loaded.next_seq == 3  # the next message does not reuse a stored seq


def test_blurred_owners_are_not_written(store: SqliteStore) -> None:
    rz, out = Rendezvous(Randomness(lambda xs: xs[0], lambda n: 0, lambda: "m" * 13), 60), []
    rz.claim("app", "7", "a", 10.0, out, owner="192.0.2.7")
    assert rz.ledger.nameplates_by["192.0.2.7"] == 1  # still charged in memory
    store.write(out)  # type: ignore[arg-type]
    owners = store.db.execute(
        "SELECT owner FROM nameplates UNION ALL SELECT owner FROM mailboxes"
    ).fetchall()
    assert owners == [(None,), (None,)]


def test_a_version_1_database_is_upgraded_with_bodies_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "channel.sqlite"
    db = sqlite3.connect(path)
    db.executescript(schema_sql("channel", 1))
    db.execute("INSERT INTO mailboxes VALUES ('app', 'mbox', 1, 5.0)")
    db.execute("INSERT INTO nameplates VALUES ('app', '4', 'mbox')")
    db.execute(
        "INSERT INTO messages (app_id, mailbox_id, side, phase, body, server_rx, msg_id)"
        " VALUES ('app', 'mbox', 'a', 'pake', 'deadbeef', 6.0, '\"x\"')"
    )
    db.commit()
    db.close()
    store = SqliteStore(path, tmp_path / "usage.sqlite")
    store.open()
    try:
        assert store.db.execute("SELECT version FROM version").fetchone() == (3,)
        assert store.db.execute("SELECT seq, body, owner FROM messages").fetchall() == [
            (1, bytes.fromhex("deadbeef"), None)
        ]
        rz = _rz()
        store.load(rz, 10.0)
        assert rz.apps["app"].nameplates["4"].owner == ""  # charged to nobody
        assert rz.ledger.stored_bytes == 4 and rz.next_seq == 2
    finally:
        store.close()


def test_a_failed_upgrade_leaves_version_1_whole(tmp_path: Path) -> None:
    path = tmp_path / "channel.sqlite"
    db = sqlite3.connect(path)
    db.executescript(schema_sql("channel", 1))
    db.execute(
        "INSERT INTO messages (app_id, mailbox_id, side, phase, body, server_rx, msg_id)"
        " VALUES ('app', 'mbox', 'a', 'pake', 'not hex', 6.0, '1')"
    )
    db.commit()
    db.close()
    with pytest.raises(DatabaseError, match="unable to upgrade"):
        SqliteStore(path, tmp_path / "usage.sqlite").open()
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM version").fetchone() == (1,)
    assert db.execute("SELECT body FROM messages").fetchone() == ("not hex",)
    db.close()


def test_failed_transaction_leaves_nothing(store: SqliteStore) -> None:
    """Any failure mid-transaction (here: an id orjson cannot encode) rolls back all of it."""
    deep: object = []
    for _ in range(300):
        deep = [deep]
    bad = [
        fx.PutMailbox("app", "m1", False, 1.0),
        fx.PutMessage("app", "m1", "a", "p", "aa", 1.0, deep, 1),
    ]
    with pytest.raises(StoreError):
        store.write(bad)
    assert store.db.execute("SELECT count(*) FROM mailboxes").fetchone() == (0,)
    store.write([fx.PutMailbox("app", "m2", False, 2.0)])  # the store still works
    assert store.db.execute("SELECT id FROM mailboxes").fetchall() == [("m2",)]
    # and forgot where the rolled-back mailbox was: m2 took its rowid, m1 has none
    with pytest.raises(StoreError, match="no mailbox"):
        store.write([fx.PutMailboxSide("app", "m1", "a", True, 3.0, None)])
    store.write([fx.PutMailboxSide("app", "m2", "a", True, 3.0, None)])
    assert store.db.execute("SELECT mailbox, side FROM mailbox_sides").fetchall() == [(1, "a")]


def test_a_version_2_database_is_upgraded_to_rows_in_creation_order(tmp_path: Path) -> None:
    """Version 3 keys sides and messages by their parent's rowid, mailboxes in creation
    order; everything loads as before, and what had no parent is left behind."""
    path = tmp_path / "channel.sqlite"
    db = sqlite3.connect(path)
    db.executescript(schema_sql("channel", 2))
    db.executescript(
        "INSERT INTO nameplates VALUES ('app', '4', 'late', 'x'), ('app', '9', 'early', NULL);"
        "INSERT INTO nameplate_sides VALUES ('app', '4', 'a', 1, 5.0), ('app', '4', 'b', 0, 6.0),"
        " ('app', '77', 'a', 1, 1.0);"
        "INSERT INTO mailboxes VALUES ('app', 'late', 1, 5.0, 'x'), ('app', 'early', 0, 2.0, NULL);"
        "INSERT INTO mailbox_sides VALUES ('app', 'late', 'a', 1, 5.0, NULL),"
        " ('app', 'early', 'b', 0, 2.5, 'happy'), ('app', 'gone', 'a', 1, 1.0, NULL);"
        "INSERT INTO messages VALUES (3, 'app', 'late', 'a', 'pake', x'beef', 7.0, '\"i\"', 'x'),"
        " (8, 'app', 'gone', 'a', 'pake', x'00', 1.0, '1', NULL);"
    )
    db.close()
    store = SqliteStore(path, tmp_path / "usage.sqlite")
    store.open()
    try:
        q = store.db.execute
        assert q("SELECT version FROM version").fetchone() == (3,)
        assert q("SELECT rowid, id FROM mailboxes ORDER BY rowid").fetchall() == [
            (1, "early"),
            (2, "late"),
        ]
        assert q("SELECT mailbox, side, mood FROM mailbox_sides ORDER BY mailbox").fetchall() == [
            (1, "b", "happy"),
            (2, "a", None),
        ]
        assert q("SELECT seq, mailbox FROM messages").fetchall() == [(3, 2)]
        assert q("SELECT count(*) FROM nameplate_sides").fetchone() == (2,)
        rz = _rz()
        store.load(rz, 10.0)
        plate = rz.apps["app"].nameplates["4"]
        assert plate.mailbox_id == "late" and sorted(plate.sides) == ["a", "b"]
        assert [m.seq for m in rz.apps["app"].mailboxes["late"].messages] == [3]
        reader = BodyReader(path)
        assert reader.read("app", "late", [3, 8]) == {3: "beef"}
        reader.close()
        # writes after the upgrade find the rows it moved
        store.write([fx.DeleteMailbox("app", "late"), fx.DeleteNameplate("app", "4")])
        assert q("SELECT count(*) FROM messages").fetchone() == (0,)
        assert q("SELECT count(*) FROM nameplate_sides").fetchone() == (0,)
    finally:
        store.close()


def test_usage_rows_land_in_the_usage_file(store: SqliteStore, tmp_path: Path) -> None:
    """Usage effects are written to usage.sqlite, readable by another connection."""
    store.write([fx.UsageMailbox("app", True, 100.0, 2.0, 9.0, "happy")])
    reader = sqlite3.connect(f"file:{tmp_path / 'usage.sqlite'}?mode=ro", uri=True)
    rows = reader.execute("SELECT app_id, result, waiting_time FROM mailboxes").fetchall()
    assert rows == [("app", "happy", 2.0)]
    reader.close()


def test_a_version_1_usage_database_gains_the_transit_table(tmp_path: Path) -> None:
    """A usage file of version 1 is upgraded in place: its rows stay, transit rows land."""
    path = tmp_path / "usage.sqlite"
    db = sqlite3.connect(path)
    db.executescript(schema_sql("usage", 1))
    db.execute(
        "INSERT INTO nameplates (app_id, started, waiting_time, total_time, result)"
        " VALUES ('app', 1.0, NULL, 2.0, 'lonely')"
    )
    db.commit()
    db.close()
    store = SqliteStore(tmp_path / "channel.sqlite", path)
    store.open()
    try:
        store.write([fx.UsageTransit(100.0, 5.0, 1.5, 20_000, "happy")])
        assert store.db.execute("SELECT version FROM usage.version").fetchone() == (2,)
        assert store.db.execute("SELECT result FROM usage.nameplates").fetchall() == [("lonely",)]
        assert store.db.execute(
            "SELECT id, started, total_time, waiting_time, total_bytes, result FROM usage.transit"
        ).fetchall() == [(1, 100.0, 5.0, 1.5, 20_000, "happy")]
    finally:
        store.close()


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
