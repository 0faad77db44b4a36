"""Real exchanges for the status tests: two WebSocket clients through claim, open, the PAKE
messages, release and close, with the moods a real client sends; and the admin listener's
JSON."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pigeonhole.server.app import MailboxServer
from tests.support.server import APPID, Client, http_get

Bound = Callable[..., Awaitable[Client]]
OTHER_APP = "example.org/other-app"


async def exchange(
    bound: Bound,
    nameplate: str,
    mood_a: str = "happy",
    mood_b: str = "happy",
    appid: str = APPID,
    srv: MailboxServer | None = None,
) -> None:
    """One whole exchange as the wormhole client makes it, then both sides disconnect."""
    a = await bound("a", appid, srv)
    b = await bound("b", appid, srv)
    mailbox = await a.claim(nameplate)
    assert await b.claim(nameplate) == mailbox
    assert await a.open(mailbox) == []
    assert await b.open(mailbox) == []
    await a.add("pake", "aa")
    assert (await b.next())["phase"] == "pake"
    await b.add("pake", "bb")
    assert (await a.next())["phase"] == "pake"
    await a.release()
    await b.release()
    await a.close(mood=mood_a)
    await b.close(mood=mood_b)
    await a.disconnect()
    await b.disconnect()


async def lonely(bound: Bound, mailbox: str, srv: MailboxServer | None = None) -> None:
    """One side opens a mailbox, nobody comes, it closes (lonely)."""
    a = await bound("a", APPID, srv)
    assert await a.open(mailbox) == []
    await a.close(mood="lonely")
    await a.disconnect()


async def crowded(bound: Bound, mailbox: str, srv: MailboxServer | None = None) -> None:
    """A third side opens the mailbox (refused: crowded); all three close."""
    a, b, c = [await bound(side, APPID, srv) for side in "abc"]
    assert await a.open(mailbox) == []
    assert await b.open(mailbox) == []
    await c.expect_error("crowded", "open", mailbox=mailbox)
    for client in (a, b, c):
        await client.close(mood="happy")
        await client.disconnect()


async def status(srv: MailboxServer) -> dict[str, Any]:
    """/status.json from the server's admin listener."""
    code, ctype, body = await http_get(f"http://127.0.0.1:{srv.admin_port}/status.json")
    assert code == 200 and ctype.startswith("application/json"), (code, ctype)
    figures = json.loads(body)
    assert isinstance(figures, dict)
    return figures


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)
