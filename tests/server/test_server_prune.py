"""Pruning with an injected clock, and restarts of the in-process server (grace period)."""

from __future__ import annotations

import pytest

from tests.support.server import FakeClock, strip, usage_rows

pytestmark = pytest.mark.asyncio

EXPIRY = 660.0
DAY = 24 * 3600.0


def results(server, table: str) -> list[str]:
    return [r["result"] for r in usage_rows(server.config, table)]


async def test_prune_idle_channel(server, bound, clock):
    """An untouched channel is pruned after prune_expiry; the nameplate gets a new mailbox."""
    a = await bound("a")
    mailbox = await a.claim("4")
    assert await a.open(mailbox) == []
    await a.add("p", "aa")
    await a.disconnect()
    clock.advance(EXPIRY + 1)
    assert await server.prune_now() == 1
    assert results(server, "nameplates") == ["pruney"]
    assert results(server, "mailboxes") == ["pruney"]
    b = await bound("b")
    fresh = await b.claim("4")
    assert fresh != mailbox
    assert await (await bound("c")).open(mailbox) == []  # the old messages are gone


async def test_not_pruned_before_expiry(server, bound, clock):
    """A channel younger than prune_expiry survives a prune with everything in it."""
    a = await bound("a")
    mailbox = await a.claim("4")
    assert await a.open(mailbox) == []
    echo = await a.add("p", "aa")
    await a.disconnect()
    clock.advance(EXPIRY - 30)
    assert await server.prune_now() == 0
    b = await bound("b")
    assert await b.claim("4") == mailbox
    assert [strip(m) for m in await b.open(mailbox)] == [strip(echo)]
    assert results(server, "mailboxes") == []


async def test_claim_open_add_refresh_but_others_do_not(server, bound, clock):
    """claim, open and add keep a channel alive; release, list, bind and ping do not."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("4")
    await b.claim("4")
    assert await a.open(mailbox) == []
    clock.advance(EXPIRY - 60)
    await a.add("p", "aa")  # refreshes
    await a.disconnect()
    clock.advance(EXPIRY - 60)
    assert await server.prune_now() == 0
    await b.release()
    await (await bound("c")).call("list")
    await (await bound("a")).sync()
    clock.advance(61)
    assert await server.prune_now() == 1
    assert results(server, "mailboxes") == ["pruney"]


async def test_subscribed_mailbox_never_pruned(server, bound, clock):
    """A mailbox with a subscribed connection survives any prune; once unsubscribed it goes."""
    a = await bound("a")
    mailbox = await a.claim("4")
    assert await a.open(mailbox) == []
    echo = await a.add("p", "aa")
    for _ in range(3):
        clock.advance(10 * DAY)
        assert await server.prune_now() == 0
    b = await bound("b")
    assert await b.claim("4") == mailbox
    assert [strip(m) for m in await b.open(mailbox)] == [strip(echo)]
    await a.disconnect()
    await b.disconnect()
    clock.advance(EXPIRY - 1)
    assert await server.prune_now() == 0  # the last prune touched it
    clock.advance(2)
    assert await server.prune_now() == 1
    assert results(server, "mailboxes") == ["pruney"]


async def test_pruned_happy_channel_is_pruney(server, bound, clock):
    """Two sides that never finished: both rows are `pruney`."""
    a, b = await bound("a"), await bound("b")
    await a.claim("4")
    await b.claim("4")
    clock.advance(EXPIRY + 1)
    assert await server.prune_now() == 1
    assert results(server, "nameplates") == ["pruney"]
    assert results(server, "mailboxes") == ["pruney"]


async def test_pruned_crowded_channel_is_crowded(server, bound, clock):
    """A crowded channel pruned gives `crowded` rows, and the nameplate is free again."""
    a, b, c = await bound("a"), await bound("b"), await bound("c")
    mailbox = await a.claim("4")
    await b.claim("4")
    await c.expect_error("crowded", "claim", nameplate="4")
    clock.advance(EXPIRY + 1)
    assert await server.prune_now() == 1
    assert results(server, "nameplates") == ["crowded"]
    assert results(server, "mailboxes") == ["crowded"]
    assert await (await bound("d")).claim("4") != mailbox


async def test_prune_released_nameplate_mailbox(server, bound, clock):
    """A mailbox whose nameplate was released lingers until prune, then is `pruney`."""
    a = await bound("a")
    mailbox = await a.claim("4")
    await a.release()
    assert results(server, "nameplates") == ["lonely"]
    clock.advance(EXPIRY + 1)
    assert await server.prune_now() == 1
    assert results(server, "mailboxes") == ["pruney"]
    assert await (await bound("x")).open(mailbox) == []


async def test_prune_only_old_channels(server, bound, clock):
    """Only channels past the expiry go; a younger one in the same app stays."""
    old = await bound("a")
    await old.claim("1")
    clock.advance(EXPIRY - 100)
    young = await bound("b")
    young_mailbox = await young.claim("2")
    clock.advance(101)
    assert await server.prune_now() == 1
    assert (await (await bound("v")).call("list"))["nameplates"] == [{"id": "2"}]
    assert await (await bound("b")).claim("2") == young_mailbox


# -- restart ------------------------------------------------------------------------


async def test_restart_keeps_channels(make_server, bound):
    """After a clean restart, nameplates, sides, mailboxes and messages are all there."""
    async with make_server() as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        mailbox = await a.claim("6")
        await b.claim("6")
        assert await a.open(mailbox) == []
        sent = [await a.add("pake", "aa", {"n": 1}), await a.add("version", "bb", None)]
        await b.open(mailbox)
        sent.append(await b.add("pake", "cc", "b1"))
        assert strip(await a.next()) == strip(sent[-1])
        await a.release()
        lonely = await bound("x", srv=srv)
        lonely_mailbox = await lonely.claim("9")
    async with make_server() as srv:
        b2 = await bound("b", srv=srv)
        assert await b2.claim("6") == mailbox
        history = await b2.open(mailbox)
        assert [strip(m) for m in history] == [strip(m) for m in sent]
        assert [m["server_rx"] for m in history] == [m["server_rx"] for m in sent]
        assert (await b2.call("list"))["nameplates"] == [{"id": "6"}, {"id": "9"}]
        await (await bound("a", srv=srv)).expect_error("reclaimed", "claim", nameplate="6")
        await (await bound("c", srv=srv)).expect_error("crowded", "claim", nameplate="6")
        assert await (await bound("x", srv=srv)).claim("9") == lonely_mailbox


async def test_restart_then_finish_channel(make_server, bound, clock):
    """A channel resumed after a restart finishes normally, with its original timings."""
    async with make_server() as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        t0 = clock()
        mailbox = await a.claim("6")
        clock.advance(20)
        await b.claim("6")
    clock.advance(30)
    async with make_server() as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        await a.release(nameplate="6")
        await b.release(nameplate="6")
        await a.close(mailbox=mailbox, mood="happy")
        await b.close(mailbox=mailbox, mood="happy")
        nameplates = usage_rows(srv.config, "nameplates")
        mailboxes = usage_rows(srv.config, "mailboxes")
    for rows in (nameplates, mailboxes):
        assert [r["result"] for r in rows] == ["happy"]
        assert rows[0]["started"] == pytest.approx(t0, abs=1)
        assert rows[0]["waiting_time"] == pytest.approx(20, abs=1)
        assert rows[0]["total_time"] == pytest.approx(50, abs=1)


async def test_restart_after_long_stop_gives_grace(make_server, bound):
    """Restarted far in the future, loaded channels survive the first prune."""
    async with make_server() as srv:
        a = await bound("a", srv=srv)
        mailbox = await a.claim("6")
        assert await a.open(mailbox) == []
        echo = await a.add("p", "aa")
    async with make_server(clock=FakeClock(offset=30 * DAY)) as srv:
        assert await srv.prune_now() == 0
        a2 = await bound("a", srv=srv)
        assert await a2.claim("6") == mailbox
        assert [strip(m) for m in await a2.open(mailbox)] == [strip(echo)]


async def test_restart_grace_then_pruned(make_server, bound):
    """Loaded channels nobody resumes are pruned prune_expiry after the restart."""
    async with make_server() as srv:
        a = await bound("a", srv=srv)
        mailbox = await a.claim("6")
    future = FakeClock(offset=30 * DAY)
    async with make_server(clock=future) as srv:
        assert await srv.prune_now() == 0
        future.advance(EXPIRY - 10)
        assert await srv.prune_now() == 0
        future.advance(11)
        assert await srv.prune_now() == 1
        assert results(srv, "nameplates") == ["pruney"]
        assert results(srv, "mailboxes") == ["pruney"]
        assert await (await bound("a", srv=srv)).claim("6") != mailbox


async def test_stop_closes_connections_with_1001(make_server, connect):
    """Stopping the server closes every WebSocket with code 1001 (going away)."""
    async with make_server() as srv:
        clients = [await connect(srv) for _ in range(2)]
        await clients[0].bind("app", "a")
    for client in clients:
        await client.ws.wait_closed()
        assert client.ws.close_code == 1001
