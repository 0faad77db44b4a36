"""The store helper dying under a running server: replaced, and what it owed is failed."""

from __future__ import annotations

import asyncio
import os
import signal

from server_support import APPID, http_get


async def test_a_helper_killed_while_idle_is_replaced_and_nothing_fails(make_server, bound):
    async with make_server() as srv:
        first = srv.helper.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # our own server's child
        for _ in range(200):  # the loop sees the pipe's end
            if srv.helper.pid is None:
                break
            await asyncio.sleep(0.01)
        assert srv.helper.pid is None
        client = await bound("a", srv=srv)
        assert await client.claim("1")  # a new helper writes and syncs it
        assert srv.helper.started == 2 and srv.metrics.storage_failures == 0


async def test_a_helper_killed_holding_a_batch_fails_it_and_the_server_recovers(
    make_server, connect, bound
):
    async with make_server(shutdown_timeout=0.5) as srv:
        kept = await bound("kept", srv=srv)
        mailbox = await kept.claim("1")  # confirmed: written and synced by the first helper
        first = srv.helper.pid
        assert first is not None
        victim = await connect(srv)
        os.kill(first, signal.SIGSTOP)  # our own server's child: it takes the batch, no more
        await victim.send("bind", appid=APPID, side="victim")
        await victim.send("claim", nameplate="2")
        await asyncio.sleep(0.3)  # the batch is in the pipe, unanswered
        os.kill(first, signal.SIGKILL)
        # the batch is lost with the helper: no `claimed`; the server reloads what is
        # durable and closes every connection with 1011 so clients resume from there
        for client in (victim, kept):
            await asyncio.wait_for(client.ws.wait_closed(), 10)
            assert client.ws.close_code == 1011
        assert srv.metrics.storage_failures == 1

        again = await bound("kept", srv=srv)
        assert await again.claim("1") == mailbox  # the confirmed claim survived
        other = await bound("other", srv=srv)
        assert await other.claim("3")  # a new helper writes and syncs
        assert srv.helper.started == 2 and srv.helper.pid not in (None, first)
        listed = (await again.call("list"))["nameplates"]
        assert {"id": "2"} not in listed  # the lost claim is not there
        status, _, body = await http_get(f"http://127.0.0.1:{srv.port}/metrics")
        assert status == 200
        assert "pigeonhole_store_helper_starts_total 2\n" in body
        assert "pigeonhole_storage_failures_total 1\n" in body
