"""Every client message type and every error string of reference §2.3, over WebSockets."""

from __future__ import annotations

import pytest

from tests.support.server import APPID, MAILBOX_ID, strip

pytestmark = pytest.mark.asyncio


# -- bind ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mtype", "fields"),
    [
        ("list", {}),
        ("allocate", {}),
        ("claim", {"nameplate": "1"}),
        ("release", {}),
        ("open", {"mailbox": "m"}),
        ("add", {"phase": "p", "body": "aa"}),
        ("close", {"mailbox": "m"}),
        ("foo", {}),
    ],
)
async def test_must_bind_first(connect, mtype, fields):
    """Every command except ping/bind before bind: ack, then "must bind first" (6.2 #4)."""
    client = await connect()
    await client.expect_error("must bind first", mtype, **fields)
    await client.quiet()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"appid": APPID}, "bind requires 'side'"),
        ({"side": "s"}, "bind requires 'appid'"),
        ({}, "bind requires 'appid'"),
    ],
)
async def test_bind_requires(connect, fields, error):
    """bind without appid or side is an error (appid checked first) (6.2 #5)."""
    client = await connect()
    await client.expect_error(error, "bind", **fields)
    await client.bind(APPID, "s")
    await client.quiet()


async def test_bind_answers_only_ack_and_second_bind_fails(connect):
    """A bind gets only its ack; a second bind is "already bound" (6.2 #5)."""
    client = await connect()
    await client.send("bind", appid=APPID, side="s", id="b1")
    await client.expect_ack("b1")
    await client.quiet()
    await client.expect_error("already bound", "bind", appid=APPID, side="s")
    await client.expect_error("already bound", "bind", appid="other", side="t")


async def test_unknown_type_after_bind(bound):
    """An unknown type after bind is "unknown type" (6.2 #6)."""
    client = await bound("s")
    await client.expect_error("unknown type", "foo", x=1)
    await client.expect_error("unknown type", "pong")
    await client.quiet()


# -- list ---------------------------------------------------------------------------


async def test_list_empty_then_populated(bound):
    """list is empty, then holds {"id": n} for a nameplate another side allocated (6.2 #7)."""
    a = await bound("a")
    assert strip(await a.call("list")) == {"type": "nameplates", "nameplates": []}
    b = await bound("b")
    allocated = await b.call("allocate")
    name = allocated["nameplate"]
    reply = await a.call("list")
    assert reply["nameplates"] == [{"id": name}]


async def test_list_sorted_as_strings_and_per_app(bound):
    """list holds every nameplate of the app only, sorted as strings ("10" before "2")."""
    for side, name in (("a", "2"), ("b", "10"), ("c", "33")):
        await (await bound(side)).claim(name)
    await (await bound("x", appid="other-app")).claim("5")
    viewer = await bound("v")
    reply = await viewer.call("list")
    assert reply["nameplates"] == [{"id": "10"}, {"id": "2"}, {"id": "33"}]
    other = await bound("w", appid="other-app")
    assert (await other.call("list"))["nameplates"] == [{"id": "5"}]


async def test_list_disallowed(make_server, bound):
    """With disallow_list, list answers no nameplates even when some exist (6.2 #28)."""
    async with make_server(disallow_list=True) as srv:
        a = await bound("a", srv=srv)
        await a.claim("4")
        b = await bound("b", srv=srv)
        assert strip(await b.call("list")) == {"type": "nameplates", "nameplates": []}


# -- allocate ---------------------------------------------------------------------------


async def test_allocate_greedy_then_claim(bound):
    """allocate gives 1..9; a second is greedy; claiming it gives the mailbox (6.2 #8)."""
    a = await bound("a")
    allocated = await a.call("allocate")
    assert set(allocated) == {"type", "nameplate", "server_tx"}
    name = allocated["nameplate"]
    assert name in {str(n) for n in range(1, 10)}
    await a.expect_error("you already allocated one, don't be greedy", "allocate")
    mailbox = await a.claim(name)  # claim after allocate on the same conn: allowed
    assert MAILBOX_ID.match(mailbox)
    b = await bound("b")
    assert await b.claim(name) == mailbox


async def test_allocate_does_not_count_as_claim_for_release(bound):
    """After allocate (without claim), release{} still needs a claim on this connection."""
    a = await bound("a")
    await a.call("allocate")
    await a.expect_error("release without nameplate must follow claim", "release")


async def test_allocate_shortest_free(bound):
    """9 allocations on an empty app give exactly 1..9; the 10th has two digits (6.2 #9)."""
    names = []
    for i in range(9):
        names.append((await (await bound(f"s{i}")).call("allocate"))["nameplate"])
    assert sorted(names, key=int) == [str(n) for n in range(1, 10)]
    tenth = (await (await bound("s9")).call("allocate"))["nameplate"]
    assert len(tenth) == 2 and 10 <= int(tenth) <= 99


async def test_allocate_fills_gaps_and_is_per_app(bound):
    """A released single digit is reused; another app still allocates single digits."""
    holders = {}
    for i in range(9):
        client = await bound(f"s{i}")
        holders[(await client.call("allocate"))["nameplate"]] = client
    await holders["4"].release(nameplate="4")
    assert (await (await bound("n")).call("allocate"))["nameplate"] == "4"
    other = await bound("o", appid="other-app")
    assert len((await other.call("allocate"))["nameplate"]) == 1


# -- claim ------------------------------------------------------------------------------


async def test_claim_errors(bound):
    """claim{} -> "claim requires 'nameplate'"; a second claim -> one per connection (#10)."""
    a = await bound("a")
    await a.expect_error("claim requires 'nameplate'", "claim")
    mailbox = await a.claim("1")
    assert MAILBOX_ID.match(mailbox)
    await a.expect_error("only one claim per connection", "claim", nameplate="1")
    await a.expect_error("only one claim per connection", "claim", nameplate="2")


async def test_claim_flag_set_only_after_success(bound):
    """After crowded or reclaimed, the same connection may still claim another nameplate."""
    a, b = await bound("a"), await bound("b")
    await a.claim("5")
    await b.claim("5")
    c = await bound("c")
    await c.expect_error("crowded", "claim", nameplate="5")
    assert MAILBOX_ID.match(await c.claim("6"))
    # reclaimed, then a different claim on the same connection
    await a.release(nameplate="5")
    a2 = await bound("a")
    await a2.expect_error("reclaimed", "claim", nameplate="5")
    await a2.claim("8")


# -- release ----------------------------------------------------------------------------


async def test_release_variants(bound):
    """release after claim; one per connection; named never-claimed is a no-op (6.2 #13)."""
    a = await bound("a")
    await a.claim("1")
    await a.release()
    await a.expect_error("only one release per connection", "release")
    await a.expect_error("only one release per connection", "release", nameplate="1")
    b = await bound("b")
    await b.release(nameplate="999")  # never claimed, never existed
    c = await bound("c")
    await c.claim("1")
    await c.expect_error("release and claim must use same nameplate", "release", nameplate="2")
    await c.release(nameplate="1")
    d = await bound("d")
    await d.expect_error("release without nameplate must follow claim", "release")


async def test_release_of_someone_elses_nameplate_is_noop(bound):
    """Releasing a nameplate this side never claimed answers released and changes nothing."""
    a = await bound("a")
    mailbox = await a.claim("3")
    await (await bound("x")).release(nameplate="3")
    b = await bound("b")
    assert await b.claim("3") == mailbox  # still alive, x took no slot
    await (await bound("a")).claim("3")  # a is not "reclaimed": it never released


async def test_release_on_new_connections(bound):
    """A claims, reconnects and releases by name; repeating on another connection (#14)."""
    a = await bound("a")
    await a.claim("1")
    await a.disconnect()
    await (await bound("a")).release(nameplate="1")
    await (await bound("a")).release(nameplate="1")
    assert (await (await bound("v")).call("list"))["nameplates"] == []


# -- open -------------------------------------------------------------------------------


async def test_open_errors(bound):
    """open{} -> "open requires 'mailbox'"; a second open -> one per connection (6.2 #20)."""
    a = await bound("a")
    await a.expect_error("open requires 'mailbox'", "open")
    assert await a.open("m1") == []
    await a.expect_error("only one open per connection", "open", mailbox="m2")
    await a.expect_error("only one open per connection", "open", mailbox="m1")
    await a.expect_error("only one open per connection", "open")


async def test_open_without_claim_any_string(bound):
    """open needs no claim and accepts any string id; its only reply is the ack."""
    a = await bound("a")
    await a.send("open", mailbox="not a base32 id!", id="o")
    await a.expect_ack("o")
    await a.quiet()
    await a.add("p", "00")


async def test_open_after_close_same_connection(bound):
    """After close, the same connection may open again (empty); a second close is refused."""
    a = await bound("a")
    assert await a.open("m") == []
    await a.add("p", "01")
    await a.close(mood="happy")  # a was the only side: the mailbox is deleted
    assert await a.open("m") == []  # recreated empty
    await a.add("q", "02")
    await a.expect_error("only one close per connection", "close")


# -- add --------------------------------------------------------------------------------


async def test_add_errors(bound):
    """add before open; missing phase; missing body (6.2 #22)."""
    a = await bound("a")
    await a.expect_error("must open mailbox before adding", "add", phase="p", body="aa")
    assert await a.open("m") == []
    await a.expect_error("missing 'phase'", "add", body="aa")
    await a.expect_error("missing 'body'", "add", phase="p")
    await a.expect_error("missing 'phase'", "add")
    await a.quiet()


async def test_add_after_close_needs_open(bound):
    """After close on this connection, add is "must open mailbox before adding"."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    await a.close()
    await a.expect_error("must open mailbox before adding", "add", phase="p", body="aa")
    await b.add("p", "aa")  # b is unaffected
    await a.quiet()  # and a, closed, gets nothing


async def test_add_after_mailbox_deleted_elsewhere(bound):
    """If the same side closed the mailbox from another connection, add needs a new open."""
    a1 = await bound("a")
    assert await a1.open("m") == []
    a2 = await bound("a")
    await a2.close(mailbox="m")  # the only side closed: the mailbox is gone
    await a1.expect_error("must open mailbox before adding", "add", phase="p", body="aa")


# -- close -------------------------------------------------------------------------------


async def test_close_variants(bound):
    """close after open; one per connection; mismatch; without open (6.2 #24)."""
    a = await bound("a")
    assert await a.open("m") == []
    await a.expect_error("open and close must use same mailbox", "close", mailbox="other")
    await a.close(mood="happy")
    await a.expect_error("only one close per connection", "close")
    await a.expect_error("only one close per connection", "close", mailbox="m")
    b = await bound("b")
    await b.expect_error("close without mailbox must follow open", "close")
    await b.expect_error("close without mailbox must follow open", "close", mood="happy")


async def test_close_named_same_mailbox(bound):
    """close{mailbox: M} after opening M is accepted."""
    a = await bound("a")
    assert await a.open("m") == []
    await a.close(mailbox="m", mood="lonely")


async def test_close_never_existing_mailbox(bound):
    """close of a never-existing mailbox is `closed`, and it creates nothing (6.2 #25)."""
    a = await bound("a")
    await a.close(mailbox="neverexisted")
    b, c = await bound("b"), await bound("c")
    assert await b.open("neverexisted") == []
    assert await c.open("neverexisted") == []  # not crowded: a took no slot
    await b.add("p", "aa")
