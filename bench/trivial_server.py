"""A trivial in-memory mailbox server: the ceiling the load generator can reach.

Same wire semantics as the reference for the happy path (welcome, ack first, bind,
list, allocate, claim, open with replay, add broadcast to every listener including the
sender, release, close, ping), no persistence, no limits, no validation beyond what the
happy path needs. Used only by the benchmark.

    python bench/trivial_server.py --port 4100 [--lib websockets|aiohttp|picows]

picows is not a dependency of the project: bench/run.py runs `--lib picows` with the
python of a side venv (~/.cache/pigeonhole-bench/picows-venv: picows, orjson, uvloop).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import resource
import time
from collections.abc import Callable
from typing import Any

import orjson

Send = Callable[[str], Any]  # queues one text frame on a connection


class Mailbox:
    __slots__ = ("listeners", "messages", "sides")

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.listeners: dict[int, Send] = {}
        self.sides: dict[str, bool] = {}  # side -> still open


class App:
    def __init__(self) -> None:
        self.nameplates: dict[str, tuple[str, set[str]]] = {}  # name -> (mailbox, sides)
        self.mailboxes: dict[str, Mailbox] = {}

    def free_nameplate(self) -> str:
        used = self.nameplates
        for digits in range(1, 8):
            top = 10**digits
            if len(used) < top // 2:
                while True:
                    name = str(random.randrange(1, top))
                    if name not in used:
                        return name
        raise RuntimeError("no nameplates left")

    def mailbox(self, mailbox_id: str) -> Mailbox:
        mb = self.mailboxes.get(mailbox_id)
        if mb is None:
            mb = self.mailboxes[mailbox_id] = Mailbox()
        return mb


APPS: dict[str, App] = {}


class Conn:
    """One connection's state; `handle` takes a decoded frame and queues replies."""

    def __init__(self, send: Send, peer: tuple[str, int]) -> None:
        self.send = send
        self.app: App | None = None
        self.side = ""
        self.nameplate: str | None = None
        self.mailbox_id: str | None = None
        self.mailbox: Mailbox | None = None
        self.key = id(self)
        self.welcome = {"your-address": {"ipv4": peer[0], "port": peer[1]}}

    def out(self, frame: dict[str, Any]) -> None:
        frame["server_tx"] = time.time()
        self.send(orjson.dumps(frame).decode())

    def error(self, text: str, orig: object) -> None:
        self.out({"type": "error", "error": text, "orig": orig})

    def handle(self, data: str | bytes) -> None:
        rx = time.time()
        try:
            msg = orjson.loads(data)
        except orjson.JSONDecodeError:
            return self.error("not JSON", str(data))
        mtype = msg.get("type")
        if mtype is None:
            return self.error("missing 'type'", msg)
        self.out({"type": "ack", "id": msg.get("id")})
        if mtype == "ping":
            return self.out({"type": "pong", "pong": msg.get("ping")})
        if mtype == "bind":
            self.app = APPS.setdefault(msg["appid"], App())
            self.side = msg["side"]
            return None
        app = self.app
        if app is None:
            return self.error("must bind first", msg)
        if mtype == "list":
            names = [{"id": n} for n in sorted(app.nameplates)]
            return self.out({"type": "nameplates", "nameplates": names})
        if mtype == "allocate":
            name = app.free_nameplate()
            self._claim(app, name)
            return self.out({"type": "allocated", "nameplate": name})
        if mtype == "claim":
            name = msg["nameplate"]
            mailbox_id = self._claim(app, name)
            self.nameplate = name
            return self.out({"type": "claimed", "mailbox": mailbox_id})
        if mtype == "release":
            name = msg.get("nameplate") or self.nameplate
            entry = app.nameplates.get(name) if name else None
            if entry is not None:
                entry[1].discard(self.side)
                if not entry[1]:
                    del app.nameplates[name]  # type: ignore[arg-type]
            return self.out({"type": "released"})
        if mtype == "open":
            self.mailbox_id = msg["mailbox"]
            mb = self.mailbox = app.mailbox(self.mailbox_id)
            mb.sides[self.side] = True
            mb.listeners[self.key] = self.send
            for stored in mb.messages:
                self.out(dict(stored))
            return None
        if mtype == "add":
            mb = self.mailbox
            if mb is None:
                return self.error("must open mailbox before adding", msg)
            stored = {
                "type": "message",
                "side": self.side,
                "phase": msg["phase"],
                "body": msg["body"],
                "server_rx": rx,
                "id": msg.get("id"),
            }
            mb.messages.append(stored)
            for send in mb.listeners.values():
                frame = dict(stored)
                frame["server_tx"] = time.time()
                send(orjson.dumps(frame).decode())
            return None
        if mtype == "close":
            mailbox_id = msg.get("mailbox") or self.mailbox_id
            mb = app.mailboxes.get(mailbox_id) if mailbox_id else None
            if mb is not None:
                mb.listeners.pop(self.key, None)
                mb.sides[self.side] = False
                if not any(mb.sides.values()):
                    del app.mailboxes[mailbox_id]  # type: ignore[arg-type]
            self.mailbox = None
            return self.out({"type": "closed"})
        return self.error("unknown type", msg)

    def _claim(self, app: App, name: str) -> str:
        entry = app.nameplates.get(name)
        if entry is None:
            mailbox_id = os.urandom(8).hex()
            entry = app.nameplates[name] = (mailbox_id, set())
            app.mailbox(mailbox_id)
        entry[1].add(self.side)
        mb = app.mailbox(entry[0])
        mb.sides.setdefault(self.side, True)
        return entry[0]

    def lost(self) -> None:
        if self.mailbox is not None:
            self.mailbox.listeners.pop(self.key, None)


#: frames produced by the last `Conn.handle` call: (websocket, text), sent in order
OUT: list[tuple[Any, str]] = []


async def flush(sender: Any) -> None:
    """Send what the last step produced, inline (no queue, no extra task)."""
    batch = OUT[:]
    OUT.clear()
    for ws, text in batch:
        with contextlib.suppress(Exception):  # a peer that went away
            await sender(ws, text)


async def serve_websockets(host: str, port: int) -> None:
    from websockets.asyncio.server import serve

    async def send(ws: Any, text: str) -> None:
        await ws.send(text)

    async def handler(ws: Any) -> None:
        conn = Conn(lambda text: OUT.append((ws, text)), ws.remote_address[:2])
        conn.out({"type": "welcome", "welcome": conn.welcome})
        await flush(send)
        try:
            async for data in ws:
                conn.handle(data)
                await flush(send)
        except Exception:
            pass
        finally:
            conn.lost()

    async with serve(
        handler, host, port, compression=None, max_size=None, ping_interval=60, backlog=4096
    ):
        print(f"trivial (websockets) listening on {host}:{port}", flush=True)
        await asyncio.Future()


async def serve_aiohttp(host: str, port: int) -> None:
    from aiohttp import WSMsgType, web

    async def send(ws: Any, text: str) -> None:
        await ws.send_str(text)

    async def root(request: web.Request) -> web.Response:
        return web.Response(text="Wormhole Relay\n")

    async def ws_handler(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(heartbeat=60.0, max_msg_size=0, compress=False)
        await ws.prepare(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        conn = Conn(lambda text: OUT.append((ws, text)), (peer[0], peer[1]) if peer else ("", 0))
        conn.out({"type": "welcome", "welcome": conn.welcome})
        await flush(send)
        try:
            async for msg in ws:
                if msg.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    conn.handle(msg.data)
                    await flush(send)
        finally:
            conn.lost()
        return ws

    app = web.Application()
    app.router.add_get("/", root)
    app.router.add_get("/v1", ws_handler)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096, reuse_address=True)
    await site.start()
    print(f"trivial (aiohttp) listening on {host}:{port}", flush=True)
    await asyncio.Future()


async def serve_picows(host: str, port: int) -> None:
    from picows import (
        WSCloseCode,
        WSFrame,
        WSListener,
        WSMsgType,
        WSTransport,
        WSUpgradeRequest,
        WSUpgradeResponse,
        WSUpgradeResponseWithListener,
        ws_create_server,
    )

    class Listener(WSListener):  # type: ignore[misc]
        """Callbacks, no task per connection: frames are answered as they are parsed."""

        conn: Conn | None = None
        parts: list[bytes] | None = None  # a fragmented message being reassembled

        def on_ws_connected(self, transport: WSTransport) -> None:
            peer = transport.underlying_transport.get_extra_info("peername")
            conn = self.conn = Conn(
                lambda text: transport.send(WSMsgType.TEXT, text),
                (peer[0], peer[1]) if peer else ("", 0),
            )
            conn.out({"type": "welcome", "welcome": conn.welcome})

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            mtype = frame.msg_type
            if mtype is WSMsgType.CLOSE:  # answer the close handshake, then hang up
                transport.send_close(WSCloseCode.OK)
                transport.disconnect()
                return
            if mtype is WSMsgType.TEXT or mtype is WSMsgType.BINARY:
                if frame.fin:
                    data: bytes = frame.get_payload_as_bytes()
                else:
                    self.parts = [frame.get_payload_as_bytes()]
                    return
            elif mtype is WSMsgType.CONTINUATION and self.parts is not None:
                self.parts.append(frame.get_payload_as_bytes())
                if not frame.fin:
                    return
                data, self.parts = b"".join(self.parts), None
            else:
                return  # pings are answered by picows (enable_auto_pong), pongs ignored
            if self.conn is not None:
                self.conn.handle(data)

        def on_ws_disconnected(self, transport: WSTransport) -> None:
            if self.conn is not None:
                self.conn.lost()

    def route(request: WSUpgradeRequest) -> Any:
        if request.path == b"/v1":
            return Listener()
        if request.path == b"/":
            ok = WSUpgradeResponse.create_ok_response(b"Wormhole Relay\n")
            return WSUpgradeResponseWithListener(ok, None)
        return None  # 404

    server = await ws_create_server(
        route,
        host,
        port,
        websocket_handshake_timeout=None,  # no limits, as the other two
        enable_auto_ping=True,  # a ping after 60 s of silence, as the other two
        auto_ping_idle_timeout=60,
        auto_ping_reply_timeout=30,
        backlog=4096,
        reuse_address=True,
    )
    print(f"trivial (picows) listening on {host}:{port}", flush=True)
    async with server:
        await asyncio.Future()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lib", choices=["websockets", "aiohttp", "picows"], default="websockets")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    run = {"websockets": serve_websockets, "aiohttp": serve_aiohttp, "picows": serve_picows}[
        args.lib
    ]
    try:
        import uvloop

        runner: Callable[[Any], Any] = uvloop.run
    except ImportError:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(run(args.host, args.port))


if __name__ == "__main__":
    main()
