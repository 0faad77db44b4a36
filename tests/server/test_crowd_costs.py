"""A crowd costs nothing: the server's periodic work does not visit every connection.

The slow-reader sweep checks only the connections a write left behind (the rest of the
crowd is never asked), the bound and subscribed counts of the usage samples are kept as
sessions change instead of recounted, and the heartbeat (which must visit everyone)
spreads its round over the interval, a slice at each tick. Real servers and real
WebSocket clients here; each test checks that the figures and the drops are what a full
walk would have given.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from pigeonhole.protocol.limits import Limits
from pigeonhole.server.app import MailboxServer
from pigeonhole.server.connection import Connection
from pigeonhole.server.node import Node
from tests.server.conftest import MakeServer
from tests.server.test_server_websocket import PING, PONG, RawClient
from tests.support.server import APPID, Client, open_client

#: the client address the slow reader is given (X-Real-IP, believed from loopback)
SLOW_ADDRESS = "192.0.2.37"
IDLE = 60
#: a ping's payload: its pong is as big, so a client that does not read falls behind
BIG = "x" * 200_000


async def until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    """Poll `condition` until it holds, failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def server_side(srv: MailboxServer, address: str) -> Connection:
    (conn,) = [c for c in srv.ctx.clients if c.address == address]
    return cast(Connection, conn)


def recount(srv: MailboxServer) -> tuple[int, int]:
    """(bound, subscribed) by a walk over every open connection, as before issue 37."""
    conns = list(srv.ctx.clients)
    return (
        sum(1 for c in conns if c.session.bound),
        sum(1 for c in conns if c.session.mailbox is not None),
    )


async def crowd(srv: MailboxServer) -> list[Client]:
    """IDLE connections: a third only connected, a third bound, a third reading a mailbox."""
    clients = []
    for i in range(IDLE):
        client = await open_client(srv.url)
        if i % 3:
            await client.bind(APPID, f"idle{i}")
        if i % 3 == 2:
            await client.open(f"idle-mailbox-{i}")
        clients.append(client)
    return clients


async def fall_behind(srv: MailboxServer, slow: ClientConnection, conn: Connection) -> int:
    """Big pings from a client that does not read, until the sweep sees it behind; how
    many were sent."""
    sent = 0
    while not srv.ctx.clients.watched:
        assert sent < 400, "the server never fell behind"
        await slow.send(json.dumps({"type": "ping", "ping": BIG, "id": sent}))
        sent += 1
    await until(lambda: conn.outbox.behind_since is not None)
    return sent


def slow_server(make_server: MakeServer, send_timeout: float) -> Any:
    return make_server(
        limits=Limits(commands_per_second=1000, command_burst=1000),
        max_buffered_bytes=256 * 1024 * 1024,
        max_connections_per_address=IDLE + 10,
        send_timeout=send_timeout,
    )


async def slow_client(srv: MailboxServer) -> ClientConnection:
    # max_queue=1: the client library stops reading the socket once one frame waits
    slow = await websockets.connect(
        srv.url,
        max_queue=1,
        max_size=None,
        ping_interval=None,
        proxy=None,
        additional_headers={"X-Real-IP": SLOW_ADDRESS},
    )
    assert json.loads(await slow.recv())["type"] == "welcome"
    return slow


@pytest.mark.sqlite_only
async def test_a_slow_reader_in_a_crowd_is_dropped_and_the_crowd_untouched(
    make_server: MakeServer,
) -> None:
    async with slow_server(make_server, send_timeout=1.0) as srv:
        clients = await crowd(srv)
        slow = await slow_client(srv)
        await slow.send(json.dumps({"type": "bind", "appid": APPID, "side": "slow"}))
        await slow.send(json.dumps({"type": "open", "mailbox": "slow-mailbox"}))
        conn = server_side(srv, SLOW_ADDRESS)
        await until(lambda: conn.session.mailbox is not None)
        counts = srv.ctx.clients
        assert (counts.bound, counts.subscribed) == recount(srv) == (41, 21)
        await fall_behind(srv, slow, conn)
        # the sweep asks this one connection, none of the crowd
        assert counts.watched == 1
        others = [c for c in srv.ctx.clients if c is not conn]
        assert all(cast(Connection, c).outbox.behind_since is None for c in others)
        await until(lambda: srv.ctx.metrics.limits["slow reader"] == 1)
        assert conn.outbox.overflowed
        assert conn not in srv.ctx.clients
        await until(lambda: counts.watched == 0)  # its close frame's write, let go
        # uncounted once, though the drop and then the lost socket both let it go
        assert (counts.bound, counts.subscribed) == recount(srv) == (40, 20)
        # the crowd is still served
        for client in clients:
            await client.quiet()
        assert len(srv.ctx.clients) == IDLE
        assert srv.ctx.metrics.limits["slow reader"] == 1
        for client in clients:
            await client.disconnect()
        await until(lambda: len(srv.ctx.clients) == 0)
        assert (counts.bound, counts.subscribed) == (0, 0)
        slow.transport.abort()  # it reads nothing, not even the end of its connection


@pytest.mark.sqlite_only
async def test_a_reader_that_caught_up_is_not_dropped(make_server: MakeServer) -> None:
    timeout = 3.0
    async with slow_server(make_server, send_timeout=timeout) as srv:
        clients = await crowd(srv)
        slow = await slow_client(srv)
        conn = server_side(srv, SLOW_ADDRESS)
        sent = await fall_behind(srv, slow, conn)
        since = conn.outbox.behind_since
        assert since is not None
        # it reads again: every reply, up to the last pong
        pongs = 0
        while pongs < sent:
            frame = json.loads(await asyncio.wait_for(slow.recv(), 10.0))
            pongs += frame["type"] == "pong"
        # the next sweep sees it caught up and forgets it
        await until(lambda: srv.ctx.clients.watched == 0)
        assert conn.outbox.behind_since is None and not conn.outbox.overflowed
        # past the moment a client behind since then would have been dropped
        sweep = min(max(timeout / 4, 0.25), 5.0)
        await until(lambda: time.monotonic() > since + timeout + 2 * sweep, timeout * 3)
        assert srv.ctx.metrics.limits["slow reader"] == 0
        assert conn in srv.ctx.clients
        await slow.send(json.dumps({"type": "ping", "ping": "still here"}))
        replies = [json.loads(await asyncio.wait_for(slow.recv(), 5.0)) for _ in range(2)]
        assert replies[1] == {**replies[1], "type": "pong", "pong": "still here"}
        for client in clients:
            await client.quiet()
        await slow.close()


async def settled(srv: MailboxServer) -> None:
    """Nothing left to decide: on a node, no queued or running command (a gone
    connection's commands are still decided after it went)."""
    decider = srv.ctx.decider
    if isinstance(decider, Node):
        queues = decider._queues
        await until(lambda: not queues._queues and not queues._inflight and not queues._gone)


async def check_counts(srv: MailboxServer, bound: int, subscribed: int) -> None:
    counts = srv.ctx.clients
    assert recount(srv) == (bound, subscribed)
    assert (counts.bound, counts.subscribed) == (bound, subscribed)
    decider = srv.ctx.decider
    if isinstance(decider, Node):
        own = decider._leadership._own_counts()
        assert own == (len(counts), bound, len(decider._notes.subscriptions))
    else:
        sample = await decider.usage_counts(srv.ctx.clock())
        assert sample is not None and sample[:3] == (len(counts), bound, subscribed)


ACTIONS = ("connect", "connect", "bind", "bind", "open", "open", "close", "leave", "race")


async def test_the_counts_equal_a_recount_after_random_traffic(make_server: MakeServer) -> None:
    """Binds, opens, closes and disconnects in a random order (some binds and opens
    racing their connection's end): the kept counts always equal a full recount."""
    rng = random.Random(37)
    async with make_server(max_connections_per_address=200) as srv:
        live: list[Client] = []
        # insertion-ordered (dicts), so the seeded choices are the same on every run
        bound: dict[Client, None] = {}
        reading: dict[Client, None] = {}
        opened: dict[Client, None] = {}
        most = (0, 0)
        done: Counter[str] = Counter()
        for step in range(120):
            action = rng.choice(ACTIONS)
            unbound = [c for c in live if c not in bound]
            unopened = [c for c in live if c in bound and c not in opened]
            if action == "connect" or not live:
                action = "connect"
                live.append(await open_client(srv.url))
            elif action == "bind" and unbound:
                client = rng.choice(unbound)
                await client.bind(APPID, f"s{step}")
                bound[client] = None
            elif action == "open" and unopened:
                client = rng.choice(unopened)
                frames = await client.open(f"mailbox-{rng.randrange(12)}")
                opened[client] = None
                if not any(f["type"] == "error" for f in frames):  # not crowded
                    reading[client] = None
            elif action == "close" and reading:
                client = rng.choice(list(reading))
                await client.close()
                del reading[client]
            elif action == "leave":
                client = rng.choice(live)
                if rng.random() < 0.5:
                    await client.disconnect()
                else:
                    client.ws.transport.abort()  # no close handshake
                live.remove(client)
                bound.pop(client, None)
                reading.pop(client, None)
            elif action == "race":
                # bind (and open) then gone at once: decided, on a node, after it went
                client = await open_client(srv.url)
                await client.send("bind", appid=APPID, side=f"r{step}")
                if rng.random() < 0.5:
                    await client.send("open", mailbox=f"mailbox-{rng.randrange(12)}")
                client.ws.transport.abort()
            else:
                action = "nothing to do"
            done[action] += 1
            await until(lambda: len(srv.ctx.clients) == len(live))
            await settled(srv)
            await check_counts(srv, len(bound), len(reading))
            most = max(most[0], len(bound)), max(most[1], len(reading))
        # the sequence reached both counts, and did each thing more than once
        assert min(most) >= 3 and min(done[a] for a in ACTIONS) >= 2, (most, done)
        for client in live:
            await client.disconnect()
        await until(lambda: len(srv.ctx.clients) == 0)
        await settled(srv)
        await check_counts(srv, 0, 0)


@pytest.mark.sqlite_only
async def test_the_heartbeat_in_slices_pings_everyone_and_drops_the_silent(
    make_server: MakeServer,
) -> None:
    """A round spread over ticks (each its share of the interval) pings every connection
    once, as one walk would; the one that answered is kept, the silent ones dropped."""
    async with make_server() as srv:
        clients = [await RawClient.open(srv) for _ in range(5)]
        await until(lambda: len(srv.ctx.clients) == 5)
        table, every = srv.ctx.clients, 4.0

        def round_at(start: float) -> None:  # one round, three ticks: 1, 3 and 1 of the 5
            for t in (start, start + 2.0, start + 4.0):
                table.heartbeat_tick(t, every)

        round_at(1000.0)  # the handshakes counted as heard
        round_at(1004.0)
        pings = [await client.recv() for client in clients]
        assert all(opcode == PING for opcode, _ in pings)
        clients[0].send(PONG, pings[0][1])
        await until(lambda: sum(cast(Connection, c).socket._heard for c in srv.ctx.clients) == 1)
        round_at(1008.0)
        for client in clients[1:]:
            assert await client.closed()
        await until(lambda: len(srv.ctx.clients) == 1)
        clients[0].send_json(type="ping", ping=7)
        assert (await clients[0].recv_json())["type"] == "ack"
        assert (await clients[0].recv_json())["pong"] == 7
