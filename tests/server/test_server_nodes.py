"""Two nodes on one PostgreSQL database are one server (in-process nodes, real WebSockets).

The node processes of tests/nodes/ and tests/interop/test_nodes.py show the same with
`pigeonhole serve` processes and real clients; these cover the protocol across nodes in
detail, fast: every exchange here has its two sides on different nodes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from pigeonhole.protocol.errors import CROWDED
from pigeonhole.server.app import MailboxServer
from pigeonhole.server.node import Node
from pigeonhole.store.postgres import POSTGRES_VERSION, schema_sql
from tests.support.postgres import fresh_database
from tests.support.server import (
    APPID,
    FakeClock,
    base_config,
    http_get,
    open_client,
    strip,
    usage_rows,
)


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[tuple[MailboxServer, MailboxServer]]:
    with fresh_database() as url:
        one = MailboxServer(base_config(tmp_path / "one", store=url))
        two = MailboxServer(base_config(tmp_path / "two", store=url))
        await one.start()
        await two.start()
        try:
            yield one, two
        finally:
            await two.stop()
            await one.stop()


def node_of(srv: MailboxServer) -> Node:
    """The server's decider: a node of the shared store."""
    assert isinstance(srv.ctx.decider, Node)
    return srv.ctx.decider


async def _bound(srv: MailboxServer, side: str, appid: str = APPID):  # type: ignore[no-untyped-def]
    client = await open_client(srv.url)
    await client.bind(appid, side)
    return client


async def test_an_exchange_across_nodes(nodes) -> None:
    one, two = nodes
    a, b = await _bound(one, "a"), await _bound(two, "b")
    reply = await a.call("allocate")
    name = reply["nameplate"]
    assert (await b.call("list"))["nameplates"] == [{"id": name}]
    mailbox = await a.claim(name)
    assert await b.claim(name) == mailbox
    assert await a.open(mailbox) == []
    echo = await a.add("pake", "aa01", msg_id="1")
    replayed = await b.open(mailbox)
    assert [strip(f) for f in replayed] == [strip(echo)]
    # live, both ways, across nodes, in order
    await b.add("pake", "bb01")
    got = await a.next_non_ack()
    assert (got["side"], got["phase"], got["body"]) == ("b", "pake", "bb01")
    for i in range(5):
        await a.add(str(i), f"a{i:03d}")
    for i in range(5):
        got = await b.next_non_ack()
        assert (got["side"], got["phase"], got["body"]) == ("a", str(i), f"a{i:03d}")
    await a.release()
    await b.release()
    await a.close(mood="happy")
    await b.close(mood="happy")
    await a.quiet()
    await b.quiet()
    rows = usage_rows(one.config, "mailboxes")
    assert [(r["result"], r["for_nameplate"]) for r in rows] == [("happy", 1)]
    node_one, node_two = node_of(one), node_of(two)
    assert await node_one.store.totals() == (0, 0, 0)
    # exactly one of them leads (prunes, samples usage); each decided in batches
    assert node_one.leader != node_two.leader
    _, _, metrics = await http_get(f"http://127.0.0.1:{two.admin_port}/metrics")
    assert f"pigeonhole_node_leader {float(node_two.leader)}\n" in metrics
    # the status page names the node, whether it leads, and how many nodes report
    await node_two.report()
    _, _, text = await http_get(f"http://127.0.0.1:{two.admin_port}/status.json")
    node = json.loads(text)["store"]["node"]
    assert node["id"] == node_two.id and node["nodes"] == 2
    assert node["leader"] == node_two.leader and node["batches"] == node_two.batches
    assert node_two.batches > 0 and node_two.store.notifications > 0


async def test_nodes_deciding_several_batches_at_once_keep_each_exchange(
    tmp_path: Path,
) -> None:
    """`node_lanes`: batches of different nameplates run side by side on each node, and
    every exchange still gets its claim, its messages in order, and its close."""
    with fresh_database() as url:
        async with (
            MailboxServer(base_config(tmp_path / "one", store=url, node_lanes=3)) as one,
            MailboxServer(base_config(tmp_path / "two", store=url, node_lanes=3)) as two,
        ):

            async def exchange(name: str) -> list[str]:
                a, b = await _bound(one, "a"), await _bound(two, "b")
                mailbox = await a.claim(name)
                assert await b.claim(name) == mailbox
                await a.open(mailbox)
                await b.open(mailbox)
                for i in range(3):
                    await a.add(str(i), f"{i:02d}")
                got = [(await b.next_non_ack())["body"] for _ in range(3)]
                await a.close(mood="happy")
                await b.close(mood="happy")
                return got

            results = await asyncio.gather(*(exchange(str(20 + i)) for i in range(6)))
            assert results == [["00", "01", "02"]] * 6
            assert node_of(one).batches > 0 and node_of(two).batches > 0


async def test_crowded_on_the_third_side_from_any_node(nodes) -> None:
    one, two = nodes
    a, b, c = await _bound(one, "a"), await _bound(two, "b"), await _bound(one, "c")
    mailbox = await a.claim("7")
    assert await b.claim("7") == mailbox
    # a side reconnecting on the other node is the same side, not a third
    again = await _bound(two, "a")
    assert await again.claim("7") == mailbox
    await c.expect_error(CROWDED, "claim", nameplate="7")


async def test_many_racing_claims_make_one_mailbox(nodes) -> None:
    """Both nodes claim the same nameplates at once: one mailbox each, crowded on 3rd."""
    one, two = nodes
    for round_ in range(10):
        name = str(100 + round_)
        clients = [await _bound(srv, side) for srv, side in ((one, "a"), (two, "b"), (one, "c"))]
        for client in clients:
            await client.send("claim", nameplate=name)
        replies = await asyncio.gather(*(c.next_non_ack() for c in clients))
        claimed = [r["mailbox"] for r in replies if r["type"] == "claimed"]
        crowded = [r for r in replies if r["type"] == "error"]
        assert len(set(claimed)) == 1, replies
        assert len(claimed) == 2 and len(crowded) == 1, replies
        assert crowded[0]["error"] == CROWDED
        for client in clients:
            await client.disconnect()


async def test_a_nul_character_is_refused_not_stored(nodes) -> None:
    one, _ = nodes
    client = await _bound(one, "a")
    reply = await client.call("claim", nameplate="4\x00")
    assert reply["type"] == "error" and "U+0000" in reply["error"]
    assert await client.claim("4") != ""  # the node goes on deciding


async def test_a_version_1_database_is_upgraded_and_its_channels_resume(tmp_path: Path) -> None:
    """The schema is versioned: a database the one-node store (v1) left is upgraded in place."""
    v1 = schema_sql("postgres-v1.sql")
    with fresh_database() as url:

        async def make_v1() -> None:
            conn = await asyncpg.connect(url)
            try:
                await conn.execute(v1)
                await conn.execute(
                    "INSERT INTO channel.nameplates VALUES ('app', '12', 'mb1', NULL);"
                    "INSERT INTO channel.nameplate_sides VALUES ('app', '12', 'a', true, 1.0);"
                    "INSERT INTO channel.mailboxes VALUES ('app', 'mb1', true, 1.0, NULL);"
                    "INSERT INTO channel.mailbox_sides VALUES ('app', 'mb1', 'a', true, 1.0, NULL);"
                    "INSERT INTO channel.messages VALUES"
                    " (41, 'app', 'mb1', 'a', 'pake', '\\xabcd', false, 2.0, '\"m1\"', NULL)"
                )
            finally:
                await conn.close()

        await make_v1()
        async with MailboxServer(base_config(tmp_path, store=url)) as srv:
            b = await _bound(srv, "b", appid="app")
            assert await b.claim("12") == "mb1"
            replay = await b.open("mb1")
            assert [(f["side"], f["body"], f["id"]) for f in replay] == [("a", "abcd", "m1")]
            echo = await b.add("version", "ee")
            assert echo["body"] == "ee"

            async def check() -> tuple[int, int]:
                conn = await asyncpg.connect(url)
                try:
                    version = await conn.fetchval("SELECT version FROM channel.version")
                    top = await conn.fetchval("SELECT max(seq) FROM channel.messages")
                    return version, top
                finally:
                    await conn.close()

            version, top = await check()
            assert version == POSTGRES_VERSION and top > 41  # numbers go on past the old ones


async def test_the_leader_role_moves_when_the_leader_goes(tmp_path: Path) -> None:
    with fresh_database() as url:
        one = MailboxServer(base_config(tmp_path / "one", store=url))
        two = MailboxServer(base_config(tmp_path / "two", store=url))
        await one.start()
        await two.start()
        try:
            node_one, node_two = node_of(one), node_of(two)
            assert node_one.leader and not node_two.leader  # the first one up leads
            await one.stop()
            for _ in range(50):  # a node tries for the lock every second
                if node_two.leader:
                    break
                await asyncio.sleep(0.1)
            assert node_two.leader
        finally:
            await two.stop()


async def test_a_lost_listener_reconnects_and_misses_nothing(nodes) -> None:
    """Notifications sent while a node's listening connection is down are not replayed by
    PostgreSQL: the node connects again, LISTENs, and re-reads its readers' mailboxes."""
    one, two = nodes
    node_one = node_of(one)
    a, b = await _bound(one, "a"), await _bound(two, "b")
    mailbox = await a.claim("55")
    assert await b.claim("55") == mailbox
    await a.open(mailbox)
    await b.open(mailbox)
    store = node_one.store
    listener = store._listener
    pid = listener.get_server_pid()
    conn = await asyncpg.connect(store.url)
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await conn.close()
    for _ in range(100):  # the node sees its listener gone (before it reconnects)
        if listener.is_closed():
            break
        await asyncio.sleep(0.01)
    assert listener.is_closed() and store.relistens == 0
    await b.add("pake", "b0b0", msg_id="while-down")  # its NOTIFY cannot reach node one
    got = await asyncio.wait_for(a.next_non_ack(), 10)
    assert (got["side"], got["body"], got["id"]) == ("b", "b0b0", "while-down")
    assert store.relistens == 1
    await b.add("version", "b1b1")
    got = await asyncio.wait_for(a.next_non_ack(), 10)
    assert got["body"] == "b1b1"
    await a.quiet()  # nothing twice


async def test_commands_sent_without_waiting_are_decided_in_order(nodes) -> None:
    """A client that sends `open` and its `add`s without waiting gets them decided in
    order (a node decides a connection's queued commands together where it can), and a
    node left with nothing to do holds no transaction open."""
    one, two = nodes
    a, b = await _bound(one, "a"), await _bound(two, "b")
    mailbox = await a.claim("7")
    assert await b.claim("7") == mailbox
    await b.open(mailbox)
    await a.send("open", mailbox=mailbox)
    for i in range(4):
        await a.send("add", phase=str(i), body=f"0{i}", id=f"m{i}")
    await a.send("close", mailbox=mailbox, mood="happy")
    frames = []
    while not frames or frames[-1]["type"] != "closed":
        frames.append(await a.next())
    echoes = [(f["phase"], f["id"]) for f in frames if f["type"] == "message"]
    assert echoes == [(str(i), f"m{i}") for i in range(4)]
    acks = [f for f in frames if f["type"] == "ack"]
    assert len(acks) == 6  # open, four adds, close: each acknowledged, in order of sending
    got = [await b.next_non_ack() for _ in range(4)]
    assert [(f["side"], f["phase"], f["body"]) for f in got] == [
        ("a", str(i), f"0{i}") for i in range(4)
    ]
    await a.quiet()
    node_one = node_of(one)
    conn = await asyncpg.connect(node_one.store.url)
    try:
        idle = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
        )
    finally:
        await conn.close()
    assert idle == 0


async def test_a_mailbox_read_on_another_node_outlives_the_expiry(tmp_path: Path) -> None:
    """The leader prunes by the database's `updated`; a mailbox whose reader is on another
    node stays alive because that node touches its readers' mailboxes every quarter of the
    expiry (at 12 s: every 3 s of the injected clock), while one nobody reads is pruned.
    (Real time runs on in the clock too: the test's waits are kept short, so that a node
    touching every 30 s would not touch again before the prune.)"""
    clock = FakeClock()
    expiry, step = 12.0, 4.0
    with fresh_database() as url:
        one = MailboxServer(base_config(tmp_path / "one", store=url, prune_expiry=expiry), clock)
        two = MailboxServer(base_config(tmp_path / "two", store=url, prune_expiry=expiry), clock)
        await one.start()
        await two.start()
        conn = await asyncpg.connect(url)
        try:
            assert node_of(one).leader and not node_of(two).leader
            reader = await _bound(two, "r")
            held = await reader.claim("31")
            await reader.open(held)
            gone = await _bound(two, "g")
            idle = await gone.claim("32")
            await gone.open(idle)
            await gone.ws.close()  # its mailbox stays, read by no one

            async def updated(mailbox: str) -> float:
                value = await conn.fetchval(
                    "SELECT updated FROM channel.mailboxes WHERE id = $1", mailbox
                )
                return float(value)

            for _ in range(4):  # 16 s in all, each step longer than a quarter of the expiry
                clock.advance(step)
                for _ in range(20):  # node two's next tick (one a second) touches it
                    if await updated(held) >= clock() - step:
                        break
                    await asyncio.sleep(0.1)
            assert await one.prune_now() == 1
            rows = await conn.fetch("SELECT id FROM channel.mailboxes ORDER BY id")
            assert [r["id"] for r in rows] == [held]
            echo = await reader.add("pake", "ab01")
            assert echo["body"] == "ab01"
        finally:
            await conn.close()
            await two.stop()
            await one.stop()


async def test_the_leader_keeps_its_own_readers_mailbox_however_stale(tmp_path: Path) -> None:
    """A mailbox whose `updated` is past the expiry (as after a reload that shortened
    it) is kept by the leader's pruning when a client of the leader reads it: touched
    then, not deleted; the one nobody reads beside it is pruned."""
    clock = FakeClock()
    with fresh_database() as url:
        one = MailboxServer(base_config(tmp_path / "one", store=url), clock)
        await one.start()
        conn = await asyncpg.connect(url)
        try:
            assert node_of(one).leader
            reader = await _bound(one, "r")
            held = await reader.claim("41")
            await reader.open(held)
            gone = await _bound(one, "g")
            idle = await gone.claim("42")
            await gone.open(idle)
            await gone.ws.close()
            await conn.execute("UPDATE channel.mailboxes SET updated = 0")  # long ago
            assert await one.prune_now() == 1
            rows = await conn.fetch("SELECT id, updated FROM channel.mailboxes")
            assert [r["id"] for r in rows] == [held] and rows[0]["updated"] > clock() - 5
        finally:
            await conn.close()
            await one.stop()
