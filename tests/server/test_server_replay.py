"""Replays on `open` come from the store when the body cache does not hold the bodies.

Bodies live in the store (as bytes); on SQLite memory keeps only a bounded cache of recent
small ones. On PostgreSQL the `open` reads them in its own transaction (nothing is cached
by a node), so the cache's own figures are checked on SQLite only.
"""

from __future__ import annotations

from tests.support.server import http_get, strip

BIG = "0f" * 300_000  # 300 KB decoded: never cached (over the item size)


async def _store_three(bound, srv, mailbox: str = "mbox") -> list[dict[str, object]]:
    sender = await bound("a", srv=srv)
    await sender.open(mailbox)
    echoes = [
        await sender.add("pake", "00ab", msg_id="i1"),
        await sender.add("version", "AAbb", msg_id={"n": [1]}),  # capitals, verbatim
        await sender.add("0", BIG, msg_id=7),
    ]
    await sender.disconnect()
    return [strip(e) for e in echoes]


async def test_a_replay_reads_bodies_the_cache_does_not_hold(make_server, bound) -> None:
    async with make_server(body_cache_bytes=0) as srv:
        sent = await _store_three(bound, srv)
        assert len(srv.ctx.rendezvous.bodies) == 0  # nothing on the heap
        receiver = await bound("b", srv=srv)
        replayed = [strip(f) for f in await receiver.open("mbox")]
        assert replayed == sent  # same bodies, ids and order as the echoes
        _, _, metrics = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
        assert "pigeonhole_stored_bytes 300004.0\n" in metrics
        if srv.config.store is None:  # SQLite: bodies read from its files
            assert srv.ctx.storage.bodies.loads == 1
            assert "pigeonhole_replay_store_reads_total 1.0\n" in metrics


async def test_live_messages_wait_behind_a_replay_from_the_store(make_server, bound) -> None:
    async with make_server(body_cache_bytes=0) as srv:
        sent = await _store_three(bound, srv)
        sender = await bound("a", srv=srv)
        await sender.open("mbox")
        receiver = await bound("b", srv=srv)
        await receiver.send("open", mailbox="mbox")
        await sender.send("add", phase="1", body="cafe", id="live")  # while it loads
        frames = [strip(await receiver.next_non_ack()) for _ in range(4)]
        assert frames[:3] == sent  # the replay first, whole, then the live message
        assert (frames[3]["phase"], frames[3]["body"], frames[3]["id"]) == ("1", "cafe", "live")


async def test_a_small_recent_body_is_replayed_from_the_cache(make_server, bound) -> None:
    async with make_server() as srv:
        sender = await bound("a", srv=srv)
        await sender.open("mbox")
        await sender.add("pake", "00ab")
        receiver = await bound("b", srv=srv)
        assert [f["body"] for f in await receiver.open("mbox")] == ["00ab"]
        assert srv.ctx.storage.bodies.loads == 0


async def test_big_bodies_stay_off_the_heap_and_survive_a_restart(make_server, bound) -> None:
    async with make_server() as srv:
        sent = await _store_three(bound, srv)
        if srv.config.store is None:  # SQLite: bodies read from its files
            assert srv.ctx.rendezvous.bodies.size == len("00ab") + len("AAbb")  # BIG is not cached
        assert srv.ctx.ledger.stored_bytes == 300_004
    async with make_server() as again:
        assert len(again.ctx.rendezvous.bodies) == 0 and again.ctx.ledger.stored_bytes == 300_004
        receiver = await bound("b", srv=again)
        assert [strip(f) for f in await receiver.open("mbox")] == sent
