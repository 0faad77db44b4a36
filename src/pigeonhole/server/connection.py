"""One WebSocket connection: frames in -> Session -> commit -> frames out.

Frames are handled synchronously as they arrive: the protocol step runs at once, its
writes join the next group commit, and its replies are queued behind that commit. The
reader never waits for the disk, so one client can pipeline many commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web

from pigeonhole.protocol.messages import FrameError, decode_frame
from pigeonhole.protocol.session import CLOSE_POLICY, Session, error_frame
from pigeonhole.server.outbox import Outbox

if TYPE_CHECKING:
    from pigeonhole.server.app import MailboxServer

log = logging.getLogger("pigeonhole.connection")

_PERMISSION_TYPES = frozenset({"submit-permissions", "submit-permission"})


class Connection:
    # slots: one per connection, so its size is memory per idle connection
    __slots__ = (
        "_close_request",
        "_transport",
        "address",
        "outbox",
        "server",
        "session",
        "ws",
    )

    def __init__(
        self,
        server: MailboxServer,
        ws: web.WebSocketResponse,
        address: str,
        port: int | None,
        transport: asyncio.Transport | None = None,
    ) -> None:
        self.server = server
        self.ws = ws
        self._transport = transport
        self.address = address
        config = server.config
        self.outbox = Outbox(
            ws,
            server.clock,
            transport=transport,
            max_frames=config.max_queued_frames,
            max_buffered_bytes=config.max_buffered_bytes,
            on_slow=self._slow,
        )
        now = server.clock()
        # a fresh hashcash resource per connection: lowercase hex, because the
        # `hashcash` program lowercases resources, and never a ":" (spec 002)
        resource = secrets.token_hex(10) if server.permissions.offers_hashcash else ""
        permission_required, bits = server.permissions.challenge(resource, now)
        self.session = Session(
            server.rendezvous,
            self,
            allow_list=not config.disallow_list,
            blur_time=config.blur_usage,
            limits=config.limits,
            permissions=server.permissions,
            resource=resource,
            bits=bits,
            now=now,
        )
        self._close_request: tuple[int, str] | None = None
        # the handshake is done: the welcome goes out now and is not kept
        welcome = server.welcome(address, port, permission_required)
        self.outbox.put({"type": "welcome", "welcome": welcome})

    async def run(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    self.handle_frame(msg.data)
                elif msg.type == WSMsgType.ERROR:
                    self.server.event("websocket error", self, error=str(self.ws.exception()))
                    break
                if self._close_request is not None:
                    code, reason = self._close_request
                    await self.close(code, reason.encode())
                    break
            await self.outbox.flush(self.server.config.shutdown_timeout)
        finally:
            self.session.disconnect()
            self.outbox.stop()

    def handle_frame(self, data: str | bytes) -> None:
        server = self.server
        try:
            msg = decode_frame(data)
        except FrameError as err:
            if err.ack:
                orig = err.orig if isinstance(err.orig, dict) else {}
                self.outbox.put({"type": "ack", "id": orig.get("id")})
            self.outbox.put(error_frame(err.explain, err.orig))
            server.metrics.count_error(err.explain)
            return
        server.metrics.count_command(msg["type"])
        step = self.session.receive(msg, server.clock())
        barrier = server.committer.submit(step.effects)
        refused = False
        for frame in step.immediate:
            self.outbox.put(frame)
            if frame["type"] == "error":
                refused = True
                server.metrics.count_error(frame["error"])
        if not refused and msg["type"] in _PERMISSION_TYPES:
            server.metrics.permissions["granted"] += 1
        for frame in step.after_commit:
            self.outbox.put(frame, barrier)
        for subscriber, frame in step.deliveries:
            assert isinstance(subscriber, Connection)
            subscriber.outbox.put(frame, barrier)
        if step.deliveries:
            server.metrics.messages += 1
        if step.close is not None:
            code, reason = step.close
            server.event("closing connection", self, code=code, reason=reason)
            self._close_request = step.close

    def check_behind(self, now: float, timeout: float) -> None:
        """Called periodically: drop the client if it has not kept up for `timeout` s."""
        if self.outbox.behind(now, timeout):
            self.outbox.drop_slow_reader()

    def _slow(self) -> None:
        """The client does not read: stop delivering, and drop it without waiting."""
        self.server.metrics.count_limit("slow reader")
        self.server.event("closing slow reader", self)
        self.session.disconnect()
        self.server.spawn(self._drop_slow())

    async def _drop_slow(self) -> None:
        # a client that does not read cannot receive a close frame: try briefly, then abort
        with contextlib.suppress(TimeoutError, ConnectionError):
            await asyncio.wait_for(
                self.ws.close(code=CLOSE_POLICY, message=b"client too slow"), 2.0
            )
        # a closing transport still holds the unread bytes and waits for the client to
        # take them, which it never does: abort drops them and the socket
        if self._transport is not None:
            self._transport.abort()

    async def close(self, code: int, message: bytes) -> None:
        """Close after the queued frames went out (bounded by the shutdown timeout)."""
        await self.outbox.flush(self.server.config.shutdown_timeout)
        await self.ws.close(code=code, message=message)
