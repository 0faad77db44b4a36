"""A connection that ends is freed as its last reference goes, not by the collector.

A connection's objects live as long as it does, so they outlive the young collections
and reach the oldest generation; in a reference cycle (the connection and its session,
its socket, its outbox's callback, the WebSocket protocol and its parser) they then
stayed in memory until a full collection, which the server makes rare (`server/run.py`):
beside a crowd, that garbage doubled the server's memory under load. Real server, real
WebSocket clients, the collector off while they come and go.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter

from websockets.protocol import Protocol

from pigeonhole.protocol.session import Session
from pigeonhole.server.connection import Connection
from pigeonhole.server.outbox import Outbox
from pigeonhole.server.websocket import MailboxSocket
from tests.server.conftest import MakeServer
from tests.server.test_crowd_costs import until
from tests.support.server import APPID, open_client

#: the server's per-connection objects (websockets' client protocol is the clients')
KINDS = (Connection, Session, MailboxSocket, Outbox, Protocol)


def held() -> Counter[str]:
    """The connections' objects in memory, garbage not yet collected included."""
    return Counter(
        type(o).__name__
        for o in gc.get_objects()
        if isinstance(o, KINDS) and type(o).__name__ != "ClientProtocol"
    )


async def test_a_closed_connection_is_freed_without_the_collector(make_server: MakeServer) -> None:
    async with make_server() as srv:
        gc.collect()
        gc.disable()
        try:
            before = held()
            a, b = await open_client(srv.url), await open_client(srv.url)
            await a.bind(APPID, "a")
            mailbox = await a.claim("7")
            await a.open(mailbox)
            await a.add("pake", "aa01")
            await b.bind(APPID, "b")
            assert await b.claim("7") == mailbox
            assert [f["body"] for f in await b.open(mailbox)] == ["aa01"]
            during = held()
            assert during - before == Counter(
                Connection=2, Session=2, MailboxSocket=2, Outbox=2, Protocol=2
            )
            await a.disconnect()
            await b.disconnect()
            await until(lambda: len(srv.ctx.clients) == 0)
            for _ in range(50):  # the transports' last callbacks
                if held() == before:
                    break
                await asyncio.sleep(0.02)
            left = held() - before
            assert left == Counter()
        finally:
            gc.enable()
            gc.collect()  # what the clients left, now, not in a later test
