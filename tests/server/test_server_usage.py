"""The usage database (DATA_DIR/usage.sqlite): rows and results per reference §4.2."""

from __future__ import annotations

import pytest

from tests.support.server import APPID, usage_rows

pytestmark = pytest.mark.asyncio


def results(server, table: str) -> list[str]:
    return [r["result"] for r in usage_rows(server.config, table)]


async def test_client_versions_one_row_per_bind(server, connect, clock):
    """Each bind writes one client_versions row; elements are str()-ified, extras ignored."""
    versions = [["python", "0.13.0"], ["rust", 1, "extra", {}], None]
    for i, version in enumerate(versions):
        client = await connect()
        fields = {} if version is None else {"client_version": version}
        await client.bind(APPID, f"side{i}", **fields)
        assert (await client.call("list"))["type"] == "nameplates"  # commit barrier
    failed = await connect()
    await failed.expect_error("bind requires 'side'", "bind", appid=APPID)
    rows = usage_rows(server.config, "client_versions")
    assert [(r["app_id"], r["side"], r["implementation"], r["version"]) for r in rows] == [
        (APPID, "side0", "python", "0.13.0"),
        (APPID, "side1", "rust", "1"),
        (APPID, "side2", None, None),
    ]
    for row in rows:
        assert abs(row["connect_time"] - clock()) < 5


async def test_nameplate_happy_with_timing(server, bound, clock):
    """Two sides claim and release: one `happy` nameplate row with waiting and total time."""
    a = await bound("a")
    t0 = clock()
    await a.claim("1")
    clock.advance(10)
    b = await bound("b")
    await b.claim("1")
    clock.advance(5)
    await a.release()
    assert usage_rows(server.config, "nameplates") == []  # b still holds it
    await b.release()
    rows = usage_rows(server.config, "nameplates")
    assert len(rows) == 1
    row = rows[0]
    assert (row["app_id"], row["result"]) == (APPID, "happy")
    assert row["started"] == pytest.approx(t0, abs=1)
    assert row["waiting_time"] == pytest.approx(10, abs=1)
    assert row["total_time"] == pytest.approx(15, abs=1)
    assert usage_rows(server.config, "mailboxes") == []  # the mailbox lives on


async def test_nameplate_lonely(server, bound):
    """One side claims and releases: a `lonely` nameplate row with NULL waiting_time."""
    a = await bound("a")
    await a.claim("1")
    await a.release()
    rows = usage_rows(server.config, "nameplates")
    assert [(r["result"], r["waiting_time"]) for r in rows] == [("lonely", None)]


async def test_nameplate_crowded_on_release(server, bound):
    """Three sides claimed (one crowded), all release: a `crowded` nameplate row."""
    a, b, c = await bound("a"), await bound("b"), await bound("c")
    await a.claim("5")
    await b.claim("5")
    await c.expect_error("crowded", "claim", nameplate="5")
    await a.release()
    await b.release()
    assert results(server, "nameplates") == []  # the crowding side's claim is kept
    await c.release(nameplate="5")
    assert results(server, "nameplates") == ["crowded"]


@pytest.mark.parametrize(
    ("mood_a", "mood_b", "expected"),
    [
        ("happy", "happy", "happy"),
        (None, None, "happy"),
        ("unwelcome", "happy", "happy"),
        ("lonely", "happy", "lonely"),
        ("errory", "happy", "errory"),
        ("errory", "lonely", "errory"),
        ("scary", "errory", "scary"),
        ("lonely", "scary", "scary"),
    ],
)
async def test_mailbox_result_moods(server, bound, clock, mood_a, mood_b, expected):
    """Two sides open and close a bare mailbox: the result follows the mood precedence."""
    a = await bound("a")
    assert await a.open("m") == []
    clock.advance(3)
    b = await bound("b")
    assert await b.open("m") == []
    await a.close(**({"mood": mood_a} if mood_a else {}))
    clock.advance(4)
    await b.close(**({"mood": mood_b} if mood_b else {}))
    rows = usage_rows(server.config, "mailboxes")
    assert len(rows) == 1
    row = rows[0]
    assert (row["app_id"], row["for_nameplate"], row["result"]) == (APPID, 0, expected)
    assert row["waiting_time"] == pytest.approx(3, abs=1)
    assert row["total_time"] == pytest.approx(7, abs=1)
    assert usage_rows(server.config, "nameplates") == []


@pytest.mark.parametrize(("mood", "expected"), [("happy", "lonely"), ("scary", "scary")])
async def test_mailbox_one_side(server, bound, mood, expected):
    """One side opens and closes: `lonely` (a scary mood still wins), NULL waiting_time."""
    a = await bound("a")
    assert await a.open("m") == []
    await a.close(mood=mood)
    rows = usage_rows(server.config, "mailboxes")
    assert [(r["result"], r["waiting_time"]) for r in rows] == [(expected, None)]


async def test_mailbox_crowded(server, bound):
    """A third side opened (crowded); once all three closed the result is `crowded`."""
    a, b, c = await bound("a"), await bound("b"), await bound("c")
    assert await a.open("m") == []
    assert await b.open("m") == []
    await c.expect_error("crowded", "open", mailbox="m")
    await a.close(mood="happy")
    await b.close(mood="happy")
    assert results(server, "mailboxes") == []
    await c.close()
    assert results(server, "mailboxes") == ["crowded"]


async def test_full_channel_one_row_each(server, bound):
    """A whole claim/open/add/release/close exchange, retries included, writes one row each."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("8")
    await b.claim("8")
    assert await a.open(mailbox) == []
    assert await b.open(mailbox) == []
    await a.add("pake", "aa")
    await b.next()
    await a.release()
    await b.release()
    await (await bound("a")).release(nameplate="8")
    await a.close(mood="happy")
    await b.close(mood="happy")
    await (await bound("b")).close(mailbox=mailbox, mood="happy")
    nameplates = usage_rows(server.config, "nameplates")
    mailboxes = usage_rows(server.config, "mailboxes")
    assert [r["result"] for r in nameplates] == ["happy"]
    assert [(r["result"], r["for_nameplate"]) for r in mailboxes] == [("happy", 1)]


async def test_last_close_with_claimed_nameplate_writes_both_rows(server, bound):
    """Closing a mailbox whose nameplate is still claimed deletes both, one row each."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("12")
    await b.claim("12")
    await a.close(mailbox=mailbox, mood="happy")
    assert results(server, "mailboxes") == []
    await b.close(mailbox=mailbox, mood="happy")
    assert results(server, "nameplates") == ["happy"]
    assert [(r["result"], r["for_nameplate"]) for r in usage_rows(server.config, "mailboxes")] == [
        ("happy", 1)
    ]
    await (await bound("a")).release(nameplate="12")  # already gone: no second row
    assert results(server, "nameplates") == ["happy"]


async def test_close_of_unknown_mailbox_writes_nothing(server, bound):
    """close of a never-existing mailbox writes no usage row (no phantom `lonely`)."""
    a = await bound("a")
    await a.close(mailbox="neverexisted")
    await a.release(nameplate="77")
    assert usage_rows(server.config, "mailboxes") == []
    assert usage_rows(server.config, "nameplates") == []


async def test_blur_usage(make_server, bound, clock):
    """With blur_usage=60, started and connect_time are multiples of 60; durations are not."""
    clock.advance(17.25)
    async with make_server(blur_usage=60) as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        mailbox = await a.claim("3")
        clock.advance(7.5)
        await b.claim("3")
        await a.release()
        await b.release()
        await a.close(mailbox=mailbox)
        await b.close(mailbox=mailbox)
        versions = usage_rows(srv.config, "client_versions")
        nameplates = usage_rows(srv.config, "nameplates")
        mailboxes = usage_rows(srv.config, "mailboxes")
    assert len(versions) == 2 and len(nameplates) == 1 and len(mailboxes) == 1
    for row in versions:
        assert row["connect_time"] % 60 == 0
    for row in nameplates + mailboxes:
        assert row["started"] % 60 == 0
        assert row["waiting_time"] == pytest.approx(7.5, abs=1)
        assert row["waiting_time"] % 60 != 0


async def test_connection_count_sample(server, bound, connect):
    """A usage sample records connections, bound, subscribed, nameplates and mailboxes."""
    a = await bound("a")
    await a.claim("1")
    b = await bound("b")
    assert await b.open("m") == []
    await connect()  # connected, not bound
    await server.sample_usage()
    rows = usage_rows(server.config, "connection_counts")
    assert [
        (r["connections"], r["bound"], r["subscribed"], r["nameplates"], r["mailboxes"])
        for r in rows
    ] == [(3, 2, 1, 1, 2)]
    current = usage_rows(server.config, "current")
    assert len(current) == 1 and current[0]["connections"] == 3
