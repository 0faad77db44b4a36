"""When a message reaches each reader, with the disk held back (a real store, slow sync).

The sender's echo is its confirmation that the message is stored: it waits for the sync.
Other sides' copies leave at once (`peer_delivery="immediate"`, the default) or after the
sync too (`"durable"`). A replay on `open` that holds the opener's own messages waits, and
keeps later messages behind it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from server_support import Client, strip

from pigeonhole.store.sqlite import SqliteStore

#: how long a frame that must not arrive yet is waited for
QUIET = 0.3


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The store's sync waits while the returned event is clear (set: a normal disk)."""
    released = threading.Event()
    released.set()
    original = SqliteStore.sync

    def held_sync(self: SqliteStore) -> None:
        released.wait(10)
        original(self)

    monkeypatch.setattr(SqliteStore, "sync", held_sync)
    yield released
    released.set()  # never leave a server's drain waiting


async def nothing_arrives(client: Client) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.next(), QUIET)


async def test_peer_gets_a_message_before_the_disk_confirms_it(disk, bound) -> None:
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == [] and await b.open("m") == []
    disk.clear()
    try:
        await a.send("add", phase="pake", body="aa", id="x")
        await a.expect_ack("x")
        message = await b.next()
        assert (message["type"], message["side"], message["body"]) == ("message", "a", "aa")
        await nothing_arrives(a)  # the echo says "stored": not before the sync
    finally:
        disk.set()
    echo = await a.next()
    assert strip(echo) == strip(message)


async def test_durable_peer_delivery_waits_for_the_disk(disk, make_server, bound) -> None:
    async with make_server(peer_delivery="durable") as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        assert await a.open("m") == [] and await b.open("m") == []
        disk.clear()
        try:
            await a.send("add", phase="pake", body="aa")
            await a.expect_ack()
            await nothing_arrives(b)
        finally:
            disk.set()
        assert strip(await b.next()) == strip(await a.next())


async def test_replay_with_own_messages_waits_and_keeps_mailbox_order(disk, bound) -> None:
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == [] and await b.open("m") == []
    disk.clear()
    try:
        await a.send("add", phase="pake", body="aa")
        await a.expect_ack()
        assert (await b.next())["body"] == "aa"  # the peer has it at once
        # side a again, on a new connection (a reconnect): its replay holds its own,
        # still unconfirmed, message, so it waits for the disk
        again = await bound("a")
        await again.send("open", mailbox="m")
        await again.expect_ack()
        await b.send("add", phase="pake", body="bb")
        await b.expect_ack()
        assert (await a.next())["body"] == "bb"  # a live reader with nothing held
        await nothing_arrives(again)  # "bb" must not overtake the held replay
    finally:
        disk.set()
    bodies = [(await again.next())["body"] for _ in range(2)]
    assert bodies == ["aa", "bb"]


async def test_replay_of_other_sides_only_is_sent_at_once(disk, bound) -> None:
    a = await bound("a")
    assert await a.open("m") == []
    await a.add("pake", "aa")
    disk.clear()
    try:
        b = await bound("b")
        await b.send("open", mailbox="m")
        await b.expect_ack()
        replayed = await b.next()
        assert (replayed["side"], replayed["body"]) == ("a", "aa")
    finally:
        disk.set()


async def test_a_second_connection_of_the_sending_side_waits_like_the_echo(disk, bound) -> None:
    """A copy for the sender's own side is a confirmation, whichever connection gets it."""
    a, stale, b = await bound("a"), await bound("a"), await bound("b")
    for client in (a, stale, b):
        assert await client.open("m") == []
    disk.clear()
    try:
        await a.send("add", phase="pake", body="aa")
        await a.expect_ack()
        assert (await b.next())["body"] == "aa"
        await nothing_arrives(stale)
    finally:
        disk.set()
    assert (await stale.next())["body"] == "aa"
    assert (await a.next())["body"] == "aa"
