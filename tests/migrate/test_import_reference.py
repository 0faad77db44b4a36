"""`import-reference` against the real reference server (magic-wormhole-mailbox-server 0.8.0).

Clients speak the mailbox protocol to the reference: a sender waiting in a mailbox with
its messages, a lonely nameplate, a crowded one, a bare mailbox in a second app and a
finished exchange (usage rows). The reference is stopped, its files are imported, and
Pigeonhole serves the result: the same clients reconnect and see exactly what the
reference had told them (mailbox ids, replayed messages with their ids and times,
`list`, crowding), and the usage history carries its rows and ids over. The reference's
files are hashed before and after: the import never changes them.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pigeonhole.server.app import MailboxServer
from tests.migrate.migrate_support import (
    OTHER_APP,
    bound,
    import_files,
    on_reference,
    rows,
    run_import,
)
from tests.support.reference import ReferenceServer, reference_database, sha256
from tests.support.server import Frame, base_config, strip

pytestmark = pytest.mark.slow


def message_frames(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f["type"] == "message"]


async def test_waiting_clients_finish_on_pigeonhole_after_the_import(
    reference: ReferenceServer, tmp_path: Path
) -> None:
    seen = await on_reference(reference.url)
    reference.stop()
    hashes = {p: sha256(p) for p in (reference.channel_db, reference.usage_db)}
    data = tmp_path / "pigeonhole"
    result = import_files(reference.channel_db, reference.usage_db, data)
    assert "imported reference channel v1, usage v2" in result.output
    assert "messages: 4" in result.output
    assert {p: sha256(p) for p in hashes} == hashes  # the reference's files are untouched

    async with MailboxServer(base_config(data)) as srv:
        # the waiting sender reconnects with its side and finds its mailbox and messages
        a = await bound(srv.url, "side-a")
        assert await a.claim("7") == seen["mailbox"]
        replay = message_frames(await a.open(seen["mailbox"]))
        assert [strip(f) for f in replay] == [strip(f) for f in seen["echoes"]]
        assert [f["server_rx"] for f in replay] == [f["server_rx"] for f in seen["echoes"]]
        listing = await a.call("list")
        assert sorted(n["id"] for n in listing["nameplates"]) == seen["nameplates"]
        # the receiver arrives (a new side) and the exchange completes
        r = await bound(srv.url, "side-r")
        assert await r.claim("7") == seen["mailbox"]
        got = message_frames(await r.open(seen["mailbox"]))
        assert [strip(f) for f in got] == [strip(f) for f in seen["echoes"]]
        answer = await r.add("pake", "11" * 8, msg_id="r1")
        assert strip(await a.next_non_ack()) == strip(answer)
        await r.release()
        await a.release()
        await a.close(mailbox=seen["mailbox"], mood="happy")
        await r.close(mailbox=seen["mailbox"], mood="happy")
        # the lonely nameplate, the crowd and the bare mailbox are as the reference left them
        b = await bound(srv.url, "side-b")
        assert await b.claim("8") == seen["lonely_mailbox"]
        w = await bound(srv.url, "side-w")
        await w.expect_error("crowded", "claim", nameplate="9")
        c = await bound(srv.url, "side-c", OTHER_APP)
        (bare,) = message_frames(await c.open("bare-mailbox-1"))
        assert strip(bare) == strip(seen["bare_echo"])
        for client in (a, r, b, w, c):
            await client.disconnect()

    # usage: the reference's rows with their ids, then Pigeonhole's own after them
    ref_mailboxes = rows(
        reference.usage_db,
        "SELECT rowid, app_id, for_nameplate, started, waiting_time, total_time, result"
        " FROM mailboxes ORDER BY rowid",
    )
    assert [r[-1] for r in ref_mailboxes] == ["happy"]
    ours = rows(
        data / "usage.sqlite",
        "SELECT id, app_id, for_nameplate, started, waiting_time, total_time, result"
        " FROM mailboxes ORDER BY id",
    )
    assert ours[: len(ref_mailboxes)] == ref_mailboxes
    assert [(r[0], r[-1]) for r in ours[len(ref_mailboxes) :]] == [(2, "happy")]
    ref_binds = rows(
        reference.usage_db,
        "SELECT rowid, app_id, side, connect_time, implementation, version FROM client_versions",
    )
    assert len(ref_binds) >= 8
    ours_binds = rows(
        data / "usage.sqlite",
        "SELECT id, app_id, side, connect_time, implementation, version FROM client_versions",
    )
    assert ours_binds[: len(ref_binds)] == ref_binds


def as_channel_v2(v1: Path, v2: Path) -> None:
    """The reference's v1 channel file upgraded to v2 as its upgrader does (spec 4.1):
    address-id and connection tables added, version 2, and a stale connection row."""
    shutil.copy(v1, v2)
    con = sqlite3.connect(v2)
    con.executescript(
        """
        CREATE TABLE addrid_generation (generation INTEGER, started INTEGER, ends INTEGER);
        CREATE TABLE connections (
            id INTEGER PRIMARY KEY AUTOINCREMENT, addrid_generation INTEGER,
            addrid_counter INTEGER, connected INTEGER, side VARCHAR,
            implementation VARCHAR, version VARCHAR, active INTEGER);
        CREATE TABLE connection_messages (id REFERENCES connections(id), `when` INTEGER,
            name VARCHAR);
        INSERT INTO addrid_generation VALUES (1, 1700000000, NULL);
        INSERT INTO connections (connected, side, active) VALUES (1700000000, 'side-a', 1);
        DELETE FROM version;
        INSERT INTO version (version) VALUES (2);
        """
    )
    con.commit()
    con.close()


def as_usage_v1(v2: Path, v1: Path) -> None:
    """A usage v1 file (the reference's own usage-v1.sql) holding the v2 file's rows."""
    reference_database(v1, "usage-v1.sql", 1)
    con = sqlite3.connect(v1)
    con.execute("ATTACH DATABASE ? AS src", (str(v2),))
    for table in ("current", "nameplates", "mailboxes"):
        con.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table}")
    con.commit()
    con.close()


def dump(data: Path) -> dict[str, list[tuple[Any, ...]]]:
    tables = {
        "channel.sqlite": ("nameplates", "nameplate_sides", "mailboxes", "mailbox_sides",
                           "messages"),
        "usage.sqlite": ("nameplates", "mailboxes", "client_versions", "current"),
    }  # fmt: skip
    return {
        f"{db}:{t}": rows(data / db, f"SELECT * FROM {t} ORDER BY 1, 2, 3")
        for db, names in tables.items()
        for t in names
    }


async def test_both_channel_and_usage_schema_versions_import(
    reference: ReferenceServer, tmp_path: Path
) -> None:
    await on_reference(reference.url)
    reference.stop()
    v2_channel, v1_usage = tmp_path / "relay-v2.sqlite", tmp_path / "usage-v1.sqlite"
    as_channel_v2(reference.channel_db, v2_channel)
    as_usage_v1(reference.usage_db, v1_usage)
    imported = {}
    for name, channel, usage in (
        ("v1-v2", reference.channel_db, reference.usage_db),
        ("v2-v1", v2_channel, v1_usage),
    ):
        data = tmp_path / name
        result = import_files(channel, usage, data)
        imported[name] = dump(data)
    assert "imported reference channel v2, usage v1" in result.output
    first, second = imported["v1-v2"], imported["v2-v1"]
    assert first["channel.sqlite:messages"] and first["channel.sqlite:nameplate_sides"]
    for table in first:
        if table != "usage.sqlite:client_versions":  # usage v1 has none
            assert first[table] == second[table], table
    assert second["usage.sqlite:client_versions"] == []
    assert len(first["usage.sqlite:client_versions"]) >= 8


def test_files_it_does_not_understand_are_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all\n" * 200)
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    con.commit()
    con.close()
    # a reference-looking file of a version it never shipped
    future = reference_database(tmp_path / "future.sqlite", "channel-v1.sql", 3)
    # Pigeonhole's own channel database: a version table, but not the reference's tables
    ours = tmp_path / "ours"
    from pigeonhole.store.sqlite.migrations import create_or_check

    ours.mkdir()
    create_or_check(ours / "channel.sqlite", "channel", 2)
    # a real reference file, damaged in the middle
    damaged = reference_database(
        tmp_path / "damaged.sqlite",
        "channel-v1.sql",
        1,
        "INSERT INTO messages VALUES ('app', 'mbox', 'side', 'pake', ?, 1.0, 'id')",
        [("ab" * 500,) for _ in range(200)],
    )
    raw = bytearray(damaged.read_bytes())
    raw[4096 * 3 : 4096 * 5] = b"\xff" * 8192
    damaged.write_bytes(bytes(raw))
    cases = {
        garbage: "not a SQLite database",
        foreign: "has no `version` table",
        future: "version 3 is not one Pigeonhole reads",
        ours / "channel.sqlite": "table `nameplates` lacks",
        damaged: "damaged",
    }
    for path, reason in cases.items():
        before = sha256(path)
        target = tmp_path / f"target-{path.stem}"
        result = run_import("--channel-db", str(path), "--data-dir", str(target))
        assert result.exit_code == 1, result.output
        assert "nothing imported" in result.output and reason in result.output, result.output
        assert not target.exists()
        assert sha256(path) == before
        assert not [p for p in tmp_path.iterdir() if ".import-" in p.name]
    # a good channel file with a bad usage file: still nothing written
    good = reference_database(tmp_path / "good.sqlite", "channel-v1.sql", 1)
    result = run_import(
        "--channel-db", str(good), "--usage-db", str(foreign), "--data-dir", str(tmp_path / "t")
    )
    assert result.exit_code == 1 and "usage database" in result.output, result.output
    assert not (tmp_path / "t").exists()


def test_a_data_directory_with_state_is_refused(tmp_path: Path) -> None:
    good = reference_database(tmp_path / "relay.sqlite", "channel-v1.sql", 1)
    data = tmp_path / "data"
    assert run_import("--channel-db", str(good), "--data-dir", str(data)).exit_code == 0
    before = {p.name: sha256(p) for p in data.iterdir()}
    again = run_import("--channel-db", str(good), "--data-dir", str(data))
    assert again.exit_code == 1
    assert "already holds server state" in again.output
    assert {p.name: sha256(p) for p in data.iterdir()} == before
    # an existing directory without state (say, made by a package) is fine
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README").write_text("kept\n")
    assert run_import("--channel-db", str(good), "--data-dir", str(empty)).exit_code == 0
    assert sorted(p.name for p in empty.iterdir()) == ["README", "channel.sqlite", "usage.sqlite"]
