"""When a message reaches each reader, with the disk held back (a real store, slow sync).

The sender's echo is its confirmation that the message is stored: it waits for the sync.
Other sides' copies leave at once (`peer_delivery="immediate"`, the default) or after the
sync too (`"durable"`). A replay on `open` that holds the opener's own messages waits, and
keeps later messages behind it. A command's ack leaves with its reply, after the sync,
except for `open` (it subscribes) and commands that write nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from pigeonhole.protocol.effects import Effect
from pigeonhole.store.group_commit import RELEASE_PER_ITERATION, Done
from pigeonhole.store.sqlite import SqliteStore
from pigeonhole.store.sqlite.helper import StoreHelper
from tests.support.server import Client, Frame, strip

#: how long a frame that must not arrive yet is waited for
QUIET = 0.3


# they hold the SQLite store's sync (its helper or its fdatasync) to watch the order
# of replies: the PostgreSQL store has no separate sync step to hold
pytestmark = pytest.mark.sqlite_only


class HeldDisk:
    """Holds every sync while clear: `SqliteStore.sync` (run by the `thread` and `loop`
    modes) waits, and batches for the store helper process (`process`, the default) are
    kept back until `set`."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.released.set()
        self.queued: list[tuple[StoreHelper, list[Effect], Done]] = []

    def clear(self) -> None:
        self.released.clear()

    def set(self) -> None:
        self.released.set()
        queued, self.queued = self.queued, []
        for helper, effects, done in queued:
            ORIGINAL_START(helper, effects, done)


ORIGINAL_START = StoreHelper.start


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldDisk]:
    """The store's syncs wait while the returned disk is clear (set: a normal disk)."""
    held = HeldDisk()
    original = SqliteStore.sync

    def held_sync(self: SqliteStore) -> None:
        held.released.wait(10)
        original(self)

    def held_start(self: StoreHelper, effects: list[Effect], done: Done) -> None:
        if held.released.is_set():
            ORIGINAL_START(self, effects, done)
        else:
            held.queued.append((self, effects, done))

    monkeypatch.setattr(SqliteStore, "sync", held_sync)
    monkeypatch.setattr(StoreHelper, "start", held_start)
    yield held
    held.set()  # never leave a server's drain waiting


async def nothing_arrives(client: Client) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.next(), QUIET)


async def expect_ack_then_echo(client: Client, msg_id: object = None) -> Frame:
    await client.expect_ack(msg_id)
    echo = await client.next()
    assert echo["type"] == "message" and echo["side"] == client.side, echo
    return echo


async def test_peer_gets_a_message_before_the_disk_confirms_it(disk, bound) -> None:
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == [] and await b.open("m") == []
    disk.clear()
    try:
        await a.send("add", phase="pake", body="aa", id="x")
        message = await b.next()
        assert (message["type"], message["side"], message["body"]) == ("message", "a", "aa")
        # the echo says "stored": not before the sync, and the ack leaves with it
        await nothing_arrives(a)
    finally:
        disk.set()
    echo = await expect_ack_then_echo(a, "x")
    assert strip(echo) == strip(message)


async def test_durable_peer_delivery_waits_for_the_disk(disk, make_server, bound) -> None:
    async with make_server(peer_delivery="durable") as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        assert await a.open("m") == [] and await b.open("m") == []
        disk.clear()
        try:
            await a.send("add", phase="pake", body="aa")
            await nothing_arrives(b)
            await nothing_arrives(a)
        finally:
            disk.set()
        assert strip(await b.next()) == strip(await expect_ack_then_echo(a))


async def test_replay_with_own_messages_waits_and_keeps_mailbox_order(disk, bound) -> None:
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == [] and await b.open("m") == []
    again = await bound("a")  # side a again, on a new connection (a reconnect)
    disk.clear()
    try:
        await a.send("add", phase="pake", body="aa")
        assert (await b.next())["body"] == "aa"  # the peer has it at once
        # the reconnected side's replay holds its own, still unconfirmed, message, so
        # it waits for the disk (the ack of `open` does not)
        await again.send("open", mailbox="m")
        await again.expect_ack()
        await b.send("add", phase="pake", body="bb")
        assert (await a.next())["body"] == "bb"  # a's own ack and echo are still held
        await nothing_arrives(again)  # "bb" must not overtake the held replay
    finally:
        disk.set()
    bodies = [(await again.next())["body"] for _ in range(2)]
    assert bodies == ["aa", "bb"]
    assert (await expect_ack_then_echo(a))["body"] == "aa"


async def test_replay_of_other_sides_only_is_sent_at_once(disk, bound) -> None:
    a = await bound("a")
    assert await a.open("m") == []
    await a.add("pake", "aa")
    b = await bound("b")
    disk.clear()
    try:
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
        assert (await b.next())["body"] == "aa"
        await nothing_arrives(stale)
    finally:
        disk.set()
    assert (await stale.next())["body"] == "aa"
    assert (await expect_ack_then_echo(a))["body"] == "aa"


async def test_ack_leaves_with_the_reply_after_the_sync(disk, bound) -> None:
    a = await bound("a")
    disk.clear()
    try:
        await a.send("allocate", id="n")
        await nothing_arrives(a)  # neither the ack nor `allocated` before the sync
    finally:
        disk.set()
    await a.expect_ack("n")
    assert (await a.next())["type"] == "allocated"


async def test_commands_that_wait_for_nothing_are_acked_at_once(disk, bound) -> None:
    a, b = await bound("a"), await bound("b")
    assert await b.open("m") == []
    disk.clear()
    try:
        # ping writes nothing: ack and pong at once
        await a.send("ping", ping=5, id="p")
        await a.expect_ack("p")
        assert (await a.next())["type"] == "pong"
        # a refused command writes nothing: ack and error at once
        await a.send("add", phase="pake", body="zz", id="e")
        await a.expect_ack("e")
        assert (await a.next())["type"] == "error"
        # open's ack comes at once (it writes, but it subscribes: see Connection)
        await a.send("open", mailbox="m", id="o")
        await a.expect_ack("o")
        await b.send("add", phase="pake", body="bb")
        assert (await a.next())["body"] == "bb"  # after the ack of open, never before
    finally:
        disk.set()


async def test_a_batch_confirming_many_connections_answers_each_in_order(disk, bound) -> None:
    """More connections than one slice of the release wait on one batch: every one gets
    its ack and reply, and what it sent after them comes after them."""
    clients = [await bound(f"s{i}") for i in range(3 * RELEASE_PER_ITERATION)]
    disk.clear()
    try:
        for client in clients:
            await client.send("allocate", id="n")
        for client in clients:
            await client.send("ping", ping=1, id="p")  # writes nothing, but queued behind
        await nothing_arrives(clients[-1])
    finally:
        disk.set()
    nameplates = set()
    for client in clients:
        await client.expect_ack("n")
        allocated = await client.next()
        assert allocated["type"] == "allocated"
        nameplates.add(allocated["nameplate"])
        await client.expect_ack("p")
        assert (await client.next())["type"] == "pong"
    assert len(nameplates) == len(clients)
