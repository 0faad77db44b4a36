"""Channels between sides: rendezvous, delivery, crowding, reconnects, deletion, apps."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.server import MAILBOX_ID, strip, usage_rows

pytestmark = pytest.mark.asyncio


async def test_two_sided_rendezvous(bound):
    """A and B claim the same nameplate, meet in one mailbox and see each other (6.2 #11)."""
    a = await bound("side-a")
    mailbox = await a.claim("42")
    assert MAILBOX_ID.match(mailbox)
    assert await a.open(mailbox) == []
    await a.send("add", phase="pake", body="aa", id="ida")
    await a.expect_ack("ida")
    echo = await a.next()
    assert strip(echo) == {
        "type": "message",
        "side": "side-a",
        "phase": "pake",
        "body": "aa",
        "id": "ida",
    }
    assert isinstance(echo["server_rx"], float)

    b = await bound("side-b")
    assert await b.claim("42") == mailbox
    stored = await b.open(mailbox)
    assert [strip(m) for m in stored] == [strip(echo)]
    assert stored[0]["server_rx"] == echo["server_rx"]

    await b.send("add", phase="pake", body="bb", id="idb")
    await b.expect_ack("idb")
    b_echo = await b.next()
    a_live = await a.next()
    assert strip(a_live) == strip(b_echo)
    assert strip(a_live) == {
        "type": "message",
        "side": "side-b",
        "phase": "pake",
        "body": "bb",
        "id": "idb",
    }
    await a.quiet()
    await b.quiet()


async def test_message_without_id_has_null_id(bound):
    """An add without `id` is delivered with `id: null`."""
    a = await bound("a")
    assert await a.open("m") == []
    await a.send("add", phase="p", body="00")
    await a.expect_ack()
    echo = await a.next()
    assert echo["id"] is None


async def test_history_on_open_in_order_then_live(bound):
    """open delivers stored messages in arrival order, then live ones follow (6.2 #21)."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    sent = [await a.add(f"p{i}", f"{i:02x}", i) for i in range(5)]
    history = await b.open("m")
    assert [strip(m) for m in history] == [strip(m) for m in sent]
    rx = [m["server_rx"] for m in history]
    assert rx == sorted(rx)
    live = await a.add("live", "ff", "L")
    assert strip(await b.next()) == strip(live)
    await b.quiet()


async def test_history_of_both_sides_interleaved(bound):
    """History holds both sides' messages interleaved exactly as they were added."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    order = []
    for i in range(3):
        order.append(await a.add("a", f"a{i}"))
        assert strip(await b.next()) == strip(order[-1])
        order.append(await b.add("b", f"b{i}"))
        assert strip(await a.next()) == strip(order[-1])
    history = await (await bound("a")).open("m")
    assert [strip(m) for m in history] == [strip(m) for m in order]


async def test_live_delivery_to_all_subscribers(bound):
    """A message reaches every subscribed connection, the sender's included."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    b_extra = await bound("b")  # the same side on a second connection
    assert await b_extra.open("m") == []
    echo = await a.add("p", "abcd")
    assert strip(await b.next()) == strip(echo)
    assert strip(await b_extra.next()) == strip(echo)
    for client in (a, b, b_extra):
        await client.quiet()


async def test_no_deduplication(bound):
    """The same phase and body added twice gives two messages, and open delivers both (#23)."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    first = await a.add("pake", "aa", "x")
    second = await a.add("pake", "aa", "x")
    assert strip(await b.next()) == strip(first)
    assert strip(await b.next()) == strip(second)
    history = await (await bound("b")).open("m")
    assert [strip(m) for m in history] == [strip(first), strip(second)]


async def test_reclaimed(bound):
    """A releases while B keeps the nameplate alive; A claiming again is reclaimed (#15)."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("2")
    assert await b.claim("2") == mailbox
    await a.release()
    a2 = await bound("a")
    await a2.expect_error("reclaimed", "claim", nameplate="2")
    assert await (await bound("b")).claim("2") == mailbox  # b is unaffected


async def test_fresh_nameplate_after_full_release(bound):
    """After the only claimant released, claiming again gives a new mailbox id (6.2 #16)."""
    a = await bound("a")
    first = await a.claim("3")
    await a.release()
    second = await (await bound("a")).claim("3")
    assert MAILBOX_ID.match(second)
    assert second != first


async def test_crowded_claim(bound):
    """A third side claiming is crowded; A and B hear nothing and carry on (6.2 #17)."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("5")
    assert await b.claim("5") == mailbox
    assert await a.open(mailbox) == []
    assert await b.open(mailbox) == []
    c = await bound("c")
    await c.expect_error("crowded", "claim", nameplate="5")
    await a.quiet()
    await b.quiet()
    echo = await a.add("p", "aa")
    assert strip(await b.next()) == strip(echo)
    # a fourth side is crowded too; as in the reference the crowding sides' rows stay,
    # so even an original side re-claiming on a new connection now hears `crowded`
    await (await bound("d")).expect_error("crowded", "claim", nameplate="5")
    await (await bound("a")).expect_error("crowded", "claim", nameplate="5")
    echo = await b.add("q", "bb")
    assert strip(await a.next()) == strip(echo)


async def test_crowded_open(bound):
    """A and B claim N; C opening N's mailbox is crowded (claim counts as open) (6.2 #18)."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("6")
    await b.claim("6")
    c = await bound("c")
    await c.expect_error("crowded", "open", mailbox=mailbox)
    await c.quiet()
    await c.expect_error("must open mailbox before adding", "add", phase="p", body="aa")


async def test_crowded_open_of_bare_mailbox(bound):
    """A third side opening a bare (nameplate-less) mailbox is crowded."""
    a, b, c = await bound("a"), await bound("b"), await bound("c")
    assert await a.open("m") == []
    assert await b.open("m") == []
    await c.expect_error("crowded", "open", mailbox="m")
    echo = await a.add("p", "aa")
    assert strip(await b.next()) == strip(echo)
    await c.quiet()  # c is not subscribed


async def test_close_by_third_side_is_closed_not_crowded(bound):
    """A third side closing a full mailbox gets `closed` (not crowded) and takes no slot."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("7")
    await b.claim("7")
    c = await bound("c")
    await c.close(mailbox=mailbox)
    assert await a.open(mailbox) == []
    assert await b.open(mailbox) == []
    echo = await a.add("p", "aa")
    assert strip(await b.next()) == strip(echo)
    # c never took a slot, so a later real third side is still the one crowded out,
    # and a and b closing deletes the mailbox normally
    await a.close()
    await b.close()
    assert await (await bound("d")).open(mailbox) == []


async def test_close_by_side_that_never_opened_existing(bound):
    """Closing an existing mailbox this side never opened is `closed` and takes no slot."""
    a = await bound("a")
    assert await a.open("m") == []
    await a.add("p", "aa")
    await (await bound("x")).close(mailbox="m")
    b = await bound("b")
    history = await b.open("m")  # not crowded: x took no slot
    assert [m["body"] for m in history] == ["aa"]


async def test_idempotent_claim_across_reconnects(bound):
    """The same side reconnecting and claiming gets the same mailbox (6.2 #12)."""
    a = await bound("a")
    mailbox = await a.claim("1")
    await a.disconnect()
    for _ in range(3):
        again = await bound("a")
        assert await again.claim("1") == mailbox
        await again.disconnect()
    assert await (await bound("b")).claim("1") == mailbox  # reconnects took no slot


async def test_idempotent_release_then_claim_after_partner(bound):
    """Release retried across reconnects stays `released` while the partner holds on."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("9")
    await b.claim("9")
    await a.release()
    await (await bound("a")).release(nameplate="9")
    await (await bound("a")).release(nameplate="9")
    assert await (await bound("b")).claim("9") == mailbox
    await b.release()
    assert (await (await bound("v")).call("list"))["nameplates"] == []


async def test_idempotent_open_across_reconnects(bound):
    """Re-opening after reconnects redelivers everything and takes no extra slot."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    first = await a.add("p", "01")
    await a.disconnect()
    a2 = await bound("a")
    assert [strip(m) for m in await a2.open("m")] == [strip(first)]
    assert [strip(m) for m in await b.open("m")] == [strip(first)]  # not crowded
    await a2.disconnect()
    a3 = await bound("a")
    assert [strip(m) for m in await a3.open("m")] == [strip(first)]


async def test_idempotent_close_across_reconnects(bound):
    """close retried on new connections of the same side stays `closed` (6.2 #24)."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("4")
    await b.claim("4")
    await a.close(mailbox=mailbox, mood="happy")
    await (await bound("a")).close(mailbox=mailbox, mood="happy")
    await (await bound("a")).close(mailbox=mailbox)
    await b.close(mailbox=mailbox, mood="happy")  # last side: deletes everything
    await (await bound("b")).close(mailbox=mailbox)  # already gone: still closed


async def test_mailbox_deleted_after_both_close(bound):
    """After both sides closed, a new side opening the id sees no old messages (6.2 #26)."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    await a.add("p", "aa")
    await a.close(mood="happy")
    assert (await b.next())["body"] == "aa"
    await b.close(mood="happy")
    c = await bound("c")
    assert await c.open("m") == []


async def test_mailbox_alive_while_one_side_open(bound):
    """After one side closes, the other still holds it; reopening delivers the history."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    echo = await a.add("p", "aa")
    await b.next()
    await a.close()
    assert [strip(m) for m in await (await bound("b")).open("m")] == [strip(echo)]


async def test_last_close_deletes_claimed_nameplate(bound):
    """Both sides close without releasing: the last closer gets `closed`, the nameplate goes."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("11")
    assert await b.claim("11") == mailbox
    await a.close(mailbox=mailbox, mood="happy")
    await b.close(mailbox=mailbox, mood="happy")
    assert (await (await bound("v")).call("list"))["nameplates"] == []
    fresh = await (await bound("c")).claim("11")
    assert fresh != mailbox


async def test_subscription_survives_only_on_opening_connection(bound):
    """A opens and disconnects; B adds; A reopening gets B's message (6.2 #27)."""
    a, b = await bound("a"), await bound("b")
    assert await a.open("m") == []
    assert await b.open("m") == []
    await a.disconnect()
    echo = await b.add("p", "bb")
    await b.quiet()
    a2 = await bound("a")
    assert [strip(m) for m in await a2.open("m")] == [strip(echo)]


async def test_nameplates_are_per_app(bound):
    """Two apps can hold the same nameplate with different mailboxes."""
    a1, a2 = await bound("a1", appid="app-one"), await bound("a2", appid="app-one")
    b1, b2 = await bound("b1", appid="app-two"), await bound("b2", appid="app-two")
    m1 = await a1.claim("7")
    m2 = await b1.claim("7")
    assert m1 != m2
    assert await a2.claim("7") == m1  # no crowding across apps: 2 sides in each
    assert await b2.claim("7") == m2


async def test_mailbox_ids_are_per_app(bound):
    """The same mailbox id in two apps is two independent mailboxes."""
    a1, a2, a3 = [await bound(s, appid="app-one") for s in ("a1", "a2", "a3")]
    b1 = await bound("b1", appid="app-two")
    assert await a1.open("shared") == []
    assert await a2.open("shared") == []
    echo = await a1.add("p", "aa")
    assert await b1.open("shared") == []  # no history from app-one, and not crowded
    b_echo = await b1.add("q", "bb")
    assert strip(await a2.next()) == strip(echo)
    await a1.quiet()
    await a2.quiet()  # app-two's message did not leak into app-one
    await a3.expect_error("crowded", "open", mailbox="shared")
    history = await (await bound("b2", appid="app-two")).open("shared")
    assert [strip(m) for m in history] == [strip(b_echo)]


async def test_claimed_mailbox_id_of_other_app_opens_empty(bound):
    """Opening, in app B, the id of app A's claimed mailbox gives an unrelated empty one."""
    a = await bound("a", appid="app-one")
    mailbox = await a.claim("1")
    assert await a.open(mailbox) == []
    await a.add("p", "aa")
    other = await bound("o", appid="app-two")
    assert await other.open(mailbox) == []
    await a.quiet()


async def test_a_close_sent_just_before_hanging_up_counts(server, bound) -> None:
    """Frames that arrive in one read with the client's close frame are still served
    (wormhole-william's text sender closes its mailbox and hangs up at once)."""
    a, b = await bound("a"), await bound("b")
    mailbox = await a.claim("31")
    assert await b.claim("31") == mailbox
    await a.open(mailbox)
    await b.open(mailbox)
    await a.close(mood="happy")
    await b.send("release")
    await b.send("close", mood="happy")
    await b.disconnect()
    for _ in range(50):
        rows = usage_rows(server.config, "mailboxes")
        if rows:
            break
        await asyncio.sleep(0.1)
    assert [r["result"] for r in rows] == ["happy"]
