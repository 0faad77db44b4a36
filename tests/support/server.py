"""Black-box helpers: the servers' base config, a mailbox WebSocket client, a fake clock,
HTTP GET.

The client uses the `websockets` library, independent of the server's aiohttp. It mirrors
the reference's `WSClient`: `next_non_ack()`, `call()` (expect the ack, then the reply) and
`sync()`, a ping/pong barrier that returns every frame that arrived before the pong.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from pigeonhole.config import ServerConfig

Frame = dict[str, Any]

APPID = "lothar.com/wormhole/text-or-file-xfer"
MAILBOX_ID = re.compile(r"^[a-z2-7]{13}$")
#: how long one frame may take to arrive before a test fails
FRAME_TIMEOUT = 5.0


def base_config(data_dir: Path, **overrides: Any) -> ServerConfig:
    """The black-box tests' server: loopback, free ports, the reference's defaults."""
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        admin_port=0,
        transit_port=0,
        data_dir=data_dir,
        motd=None,
        signal_error=None,
        advertise_version=None,
        disallow_list=False,
        blur_usage=None,
        prune_expiry=660.0,
        prune_interval=300.0,
    )
    return replace(config, **overrides)


class FakeClock:
    """Real time plus an offset the test moves forward (`advance`) to age channels."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class Client:
    """One WebSocket connection speaking the mailbox protocol."""

    def __init__(self, ws: ClientConnection, welcome: Frame) -> None:
        self.ws = ws
        self.welcome: Frame = welcome["welcome"]
        self.welcome_frame = welcome
        self._queue: deque[Frame] = deque()
        self._pings = 0
        self.side: str | None = None

    # -- sending ----------------------------------------------------------------

    async def send(self, mtype: object = None, /, **fields: Any) -> None:
        """Send `{"type": mtype, **fields}` as a text frame (no `type` if mtype is None)."""
        msg = dict(fields)
        if mtype is not None:
            msg = {"type": mtype, **msg}
        await self.ws.send(json.dumps(msg))

    async def send_raw(self, data: str | bytes) -> None:
        """Send one frame verbatim: str -> text frame, bytes -> binary frame."""
        await self.ws.send(data)

    # -- receiving --------------------------------------------------------------

    async def _recv(self) -> Frame:
        data = await asyncio.wait_for(self.ws.recv(), FRAME_TIMEOUT)
        assert isinstance(data, str), f"server sent a binary frame: {data!r}"
        frame = json.loads(data)
        assert isinstance(frame, dict), frame
        assert isinstance(frame.get("server_tx"), float), f"no float server_tx: {frame}"
        return frame

    async def next(self) -> Frame:
        """The next frame, acks included."""
        if self._queue:
            return self._queue.popleft()
        return await self._recv()

    async def next_non_ack(self) -> Frame:
        while True:
            frame = await self.next()
            if frame["type"] != "ack":
                return frame

    async def expect_ack(self, msg_id: object = None) -> None:
        frame = await self.next()
        assert frame["type"] == "ack", f"expected ack, got {frame}"
        assert frame["id"] == msg_id, frame

    async def call(self, mtype: str, /, **fields: Any) -> Frame:
        """Send a typed message, check its ack comes first, return the next frame."""
        await self.send(mtype, **fields)
        await self.expect_ack(fields.get("id"))
        return await self.next()

    async def expect_error(self, error: str, mtype: str, /, **fields: Any) -> Frame:
        """Send a typed message; expect ack then `error` with `orig` = the message."""
        reply = await self.call(mtype, **fields)
        assert reply["type"] == "error", reply
        assert reply["error"] == error, reply
        assert reply["orig"] == {"type": mtype, **fields}, reply
        return reply

    async def sync(self) -> list[Frame]:
        """Ping/pong barrier: every frame (acks stripped) that came before the pong."""
        self._pings += 1
        token = f"sync-{self._pings}"
        await self.send("ping", ping=token)
        before: list[Frame] = []
        while True:
            frame = await self.next()
            if frame["type"] == "pong" and frame["pong"] == token:
                break
            if frame["type"] != "ack":
                before.append(frame)
        return before

    async def quiet(self) -> None:
        """Assert nothing but acks arrived (pipeline drained with a ping barrier)."""
        assert await self.sync() == []

    # -- protocol shortcuts -----------------------------------------------------

    async def bind(self, appid: str, side: str, **fields: Any) -> None:
        await self.send("bind", appid=appid, side=side, **fields)
        await self.expect_ack()
        self.side = side

    async def claim(self, nameplate: str) -> str:
        reply = await self.call("claim", nameplate=nameplate)
        assert reply["type"] == "claimed", reply
        return str(reply["mailbox"])

    async def open(self, mailbox: str) -> list[Frame]:
        """Open and return the stored messages delivered at once."""
        await self.send("open", mailbox=mailbox)
        await self.expect_ack()
        return await self.sync()

    async def add(self, phase: str, body: str, msg_id: object = None) -> Frame:
        """Add a message and return its echo to this (subscribed) connection."""
        await self.send("add", phase=phase, body=body, id=msg_id)
        await self.expect_ack(msg_id)
        echo = await self.next()
        assert echo["type"] == "message", echo
        assert (echo["side"], echo["phase"], echo["body"]) == (self.side, phase, body), echo
        return echo

    async def close(self, **fields: Any) -> None:
        reply = await self.call("close", **fields)
        assert reply["type"] == "closed", reply

    async def release(self, **fields: Any) -> None:
        reply = await self.call("release", **fields)
        assert reply["type"] == "released", reply

    async def disconnect(self) -> None:
        await self.ws.close()


async def open_client(url: str, headers: dict[str, str] | None = None) -> Client:
    ws = await connect(
        url,
        additional_headers=headers,
        proxy=None,
        open_timeout=FRAME_TIMEOUT,
        max_size=None,
        ping_interval=None,
        close_timeout=2,
    )
    data = await asyncio.wait_for(ws.recv(), FRAME_TIMEOUT)
    assert isinstance(data, str), "the welcome must be a text frame"
    welcome = json.loads(data)
    assert welcome["type"] == "welcome", welcome
    return Client(ws, welcome)


def strip(frame: Frame) -> Frame:
    """A frame without its `server_tx` (and `server_rx`), for exact comparison."""
    return {k: v for k, v in frame.items() if k not in ("server_tx", "server_rx")}


async def http_get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, with no proxy from the environment."""

    def get() -> tuple[int, str, str]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(url, timeout=FRAME_TIMEOUT) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("Content-Type", ""), err.read().decode()

    return await asyncio.to_thread(get)


def usage_rows(where: ServerConfig | Path, table: str) -> list[dict[str, Any]]:
    """Every row of one usage table, oldest first: from `usage.sqlite` in a data directory,
    or from the PostgreSQL database a server config names (`store`)."""
    if isinstance(where, ServerConfig) and where.store is not None:
        return _postgres_rows(where.store, table)
    data_dir = where.data_dir if isinstance(where, ServerConfig) else where
    db = sqlite3.connect(data_dir / "usage.sqlite")
    try:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY rowid")]
    finally:
        db.close()


def _postgres_rows(url: str, table: str) -> list[dict[str, Any]]:
    import asyncpg  # type: ignore[import-untyped]

    from tests.support.postgres import run

    order = "" if table == "current" else " ORDER BY id"

    async def fetch() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(url)
        try:
            return [dict(r) for r in await conn.fetch(f"SELECT * FROM usage.{table}{order}")]
        finally:
            await conn.close()

    return run(fetch)
