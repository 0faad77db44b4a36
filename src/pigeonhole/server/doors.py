"""The WebSocket doors the front door hands a checked upgrade to: the mailbox and the relay.

A mailbox upgrade is admitted against the connection limits, answered with its 101 and
the welcome in one write, and runs on a `MailboxSocket` with a `Connection` from there; an
upgrade at the transit path goes to the relay. Both count their client by the one rule of
pigeonhole/clients.py, after trusted proxies (server/addresses.py), and match it against
the deny and notice rules (server/rules.py): a denied client gets its reason in the
welcome's `error` (the mailbox) or a 1008 close (the relay), a noticed one its message in
the welcome's motd.
"""

from __future__ import annotations

import asyncio

import orjson
from websockets.protocol import Protocol, Side

from pigeonhole.protocol.session import CLOSE_POLICY
from pigeonhole.protocol.welcome import welcome_body, your_address
from pigeonhole.server.connection import Connection
from pigeonhole.server.context import ServerContext
from pigeonhole.server.handshake import HandshakeError, Head, accept, reject
from pigeonhole.server.rules import Deny, Notice, close_reason
from pigeonhole.server.websocket import MailboxSocket

#: seconds a denied client has to answer the close before it is dropped
DENIED_CLOSE_TIMEOUT = 2.0


class Doors:
    """The front door's `Acceptor` (server/front_door.py)."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: ServerContext) -> None:
        self._ctx = ctx

    def accept_websocket(self, transport: asyncio.Transport, head: Head, rest: bytes) -> None:
        """Answer a mailbox handshake; on success the connection runs on a MailboxSocket."""
        ctx = self._ctx
        host, port, _ = ctx.addresses.client(transport, head.headers)
        rule = ctx.settings.rules.match(host)
        if isinstance(rule, Deny):
            self._deny_mailbox(transport, head, host, port, rule.reason)
            return
        notice = rule.message if isinstance(rule, Notice) else None
        client = ctx.addresses.key(host)  # what every per-address bound counts
        refused = self._admission(client)
        if refused is not None:
            transport.write(refused)
            transport.close()
            return
        response = self._accepted(transport, head)
        if response is None:
            return
        # no permessage-deflate: frames are small JSON, written as they are produced
        socket = MailboxSocket(transport, ctx.config.max_frame_bytes)
        transport.set_protocol(socket)
        socket.begin()
        conn = Connection(ctx, socket, client, host, port, notice)  # queues the welcome
        if notice is not None:
            ctx.metrics.notices_sent += 1
        socket.conn = conn
        socket.end(preamble=response)  # the 101 and the welcome leave in one write
        ctx.clients.attach(conn)
        if rest:
            socket.data_received(rest)

    def accept_transit(self, transport: asyncio.Transport, head: Head, rest: bytes) -> None:
        """A WebSocket upgrade at /transit: the relay's, counted by the client rule."""
        ctx = self._ctx
        if ctx.transit is None:
            transport.write(reject(404, "no transit relay here\n"))
            transport.close()
            return
        host = ctx.addresses.client(transport, head.headers).host
        response = self._accepted(transport, head)
        if response is None:
            return
        rule = ctx.settings.rules.match(host)
        if isinstance(rule, Deny):  # accepted, then closed 1008 with the reason at once
            ctx.metrics.denied_by_rule["websocket relay"] += 1
            closing = Protocol(Side.SERVER)
            closing.send_close(CLOSE_POLICY, close_reason(rule.reason))
            transport.write(response + b"".join(closing.data_to_send()))
            transport.close()
            return
        ctx.transit.accept_websocket(transport, response, rest, ctx.addresses.key(host))

    def _deny_mailbox(
        self, transport: asyncio.Transport, head: Head, host: str, port: int | None, reason: str
    ) -> None:
        """A denied client's handshake is accepted and answered with a welcome whose
        `error` is the reason (the CLIs print it and stop), then closed 1008; the socket
        has no connection behind it, so nothing it sends is acted on or stored."""
        ctx = self._ctx
        response = self._accepted(transport, head)
        if response is None:
            return
        ctx.metrics.denied_by_rule["mailbox"] += 1
        body = welcome_body(
            motd=None, signal_error=reason, advertise_version=None, address=your_address(host, port)
        )
        frame = {"type": "welcome", "welcome": body, "server_tx": ctx.clock()}
        socket = MailboxSocket(transport, ctx.config.max_frame_bytes)
        transport.set_protocol(socket)
        socket.begin()
        socket.send_text(orjson.dumps(frame))
        socket.end(preamble=response)
        ctx.tasks.spawn(socket.close(CLOSE_POLICY, close_reason(reason), DENIED_CLOSE_TIMEOUT))

    def _accepted(self, transport: asyncio.Transport, head: Head) -> bytes | None:
        """The 101 for a valid upgrade; None once an invalid one is answered (and counted)."""
        try:
            return accept(head)
        except HandshakeError as invalid:
            self._ctx.events.bad_input.note("handshake", invalid.kind)
            transport.write(invalid.response)
            transport.close()
            return None

    def _admission(self, client: str) -> bytes | None:
        """The HTTP refusal (503/429 with a plain reason) when over a connection limit."""
        ctx = self._ctx
        refusal = ctx.clients.refusal(client)
        if refusal is None:
            return None
        status, text, kind = refusal
        ctx.metrics.count_limit(kind)
        if kind == "connections per address":
            ctx.events.event(
                "refused connection: too many from one address", None, kind=kind, address=client
            )
        return reject(status, text)
