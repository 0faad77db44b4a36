"""The store helper dying under a running server: replaced, and what it owed written again."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from tests.support.server import APPID, http_get

# the store helper process is the SQLite store's
pytestmark = pytest.mark.sqlite_only


async def test_a_helper_killed_while_idle_is_replaced_and_nothing_fails(make_server, bound):
    async with make_server() as srv:
        first = srv.ctx.storage.helper.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # our own server's child
        for _ in range(200):  # the loop sees the pipe's end
            if srv.ctx.storage.helper.pid is None:
                break
            await asyncio.sleep(0.01)
        assert srv.ctx.storage.helper.pid is None
        client = await bound("a", srv=srv)
        assert await client.claim("1")  # a new helper writes and syncs it
        assert srv.ctx.storage.helper.started == 2 and srv.ctx.metrics.storage_failures == 0


async def test_a_helper_killed_holding_a_batch_is_replaced_and_the_batch_written_again(
    make_server, connect, bound
):
    async with make_server(shutdown_timeout=0.5) as srv:
        kept = await bound("kept", srv=srv)
        mailbox = await kept.claim("1")  # confirmed: written and synced by the first helper
        first = srv.ctx.storage.helper.pid
        assert first is not None
        victim = await connect(srv)
        os.kill(first, signal.SIGSTOP)  # our own server's child: it takes the batch, no more
        await victim.send("bind", appid=APPID, side="victim")
        await victim.send("claim", nameplate="2")
        helper = srv.ctx.storage.helper
        for _ in range(500):  # the batch is in the pipe, unanswered
            if helper._waiting:  # the requests sent and not yet answered
                break
            await asyncio.sleep(0.01)
        assert helper._waiting, "no batch went to the stopped helper"
        os.kill(first, signal.SIGKILL)
        # the batch was rolled back with the helper: a new helper writes it again, and
        # the claim held for it is answered; no connection is closed
        await victim.expect_ack()
        await victim.expect_ack()
        claimed = await victim.next()
        assert claimed["type"] == "claimed", claimed
        assert srv.ctx.metrics.storage_failures == 1
        assert srv.ctx.storage.helper.started == 2 and srv.ctx.storage.helper.pid not in (
            None,
            first,
        )
        assert not srv.ctx.ledger.storage_down  # recovered by itself
        listed = (await kept.call("list"))["nameplates"]
        assert {"id": "1"} in listed and {"id": "2"} in listed
        other = await bound("other", srv=srv)
        assert await other.claim("1") == mailbox  # the confirmed claim is there too
        status, _, body = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
        assert status == 200
        assert "pigeonhole_store_helper_starts_total 2.0\n" in body
        assert "pigeonhole_storage_failures_total 1.0\n" in body
        for client in (victim, kept):
            assert client.ws.close_code is None
    # and it is on disk: a restart has the claim the killed helper never wrote
    async with make_server() as again:
        assert {"2", "1"} <= {n for a in again.ctx.rendezvous.apps.values() for n in a.nameplates}
