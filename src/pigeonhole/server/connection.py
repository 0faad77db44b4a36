"""One WebSocket connection: frames in -> the server's decider -> frames out.

Frames are handled synchronously as they arrive (`MailboxSocket.data_received` calls
`handle_frame`) and handed to the decider (server/deciding.py). On SQLite the protocol
step runs at once, its writes join the next group commit, and its replies are queued
behind that commit (`emit`); a node of a shared store decides it in a later batch and
sends the replies after that batch's commit (`emit_run`). Nothing waits for the disk, so
one client can pipeline many commands, and an idle connection has no task.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from pigeonhole.config import ServerConfig
from pigeonhole.protocol.limits import TOO_MANY_COMMANDS
from pigeonhole.protocol.messages import FrameError, decode_frame
from pigeonhole.protocol.session import CLOSE_POLICY, Frame, Session, Step, error_frame
from pigeonhole.protocol.welcome import welcome_body, your_address
from pigeonhole.server.context import ServerContext
from pigeonhole.server.outbox import Barrier, Outbox
from pigeonhole.server.rules import close_reason
from pigeonhole.server.websocket import MailboxSocket
from pigeonhole.store.group_commit import Commit

log = logging.getLogger("pigeonhole.connection")

CLOSE_INTERNAL_ERROR = 1011

_PERMISSION_TYPES = frozenset({"submit-permissions", "submit-permission"})


def welcome_for(
    c: ServerConfig,
    host: str,
    port: int | None,
    permission_required: dict[str, object],
    notice: str | None = None,
) -> dict[str, object]:
    """The welcome body for a client at (host, port), with its permission challenge; a
    notice rule's message (server/rules.py) comes first in the motd, then `--motd`."""
    extra: dict[str, object] = {"permission-required": permission_required}
    if c.disallow_list:
        extra["list-disabled"] = True
    motd = c.motd if notice is None else notice if c.motd is None else f"{notice}\n\n{c.motd}"
    return welcome_body(
        motd=motd,
        signal_error=c.signal_error,
        advertise_version=c.advertise_version,
        address=your_address(host, port),
        extra=extra,
    )


class Connection:
    # slots: one per connection, so its size is memory per idle connection
    __slots__ = (
        "_close_request",
        "address",
        "counted",
        "ctx",
        "host",
        "outbox",
        "session",
        "socket",
    )

    def __init__(
        self,
        ctx: ServerContext,
        socket: MailboxSocket,
        client: str,
        host: str,
        port: int | None,
        notice: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.socket = socket
        #: the address the server believes (after trusted proxies): what rules match
        self.host = host
        #: the client as every limit, quota and log counts it (pigeonhole/clients.py: an
        #: IPv6 client is its prefix); only the welcome's `your-address` gets `host`
        self.address = client
        config = ctx.config
        self.outbox = Outbox(
            socket,
            ctx.clock,
            max_frames=config.max_queued_frames,
            max_buffered_bytes=config.max_buffered_bytes,
            on_slow=self._slow,
        )
        now = ctx.clock()
        # a fresh hashcash resource per connection: lowercase hex, because the
        # `hashcash` program lowercases resources, and never a ":" (spec 002)
        resource = secrets.token_hex(10) if ctx.permissions.offers_hashcash else ""
        permission_required, bits = ctx.permissions.challenge(resource, now)
        self.session = Session(
            ctx.rendezvous,
            self,
            allow_list=not config.disallow_list,
            blur_time=config.blur_usage,
            limits=config.limits,
            permissions=ctx.permissions,
            resource=resource,
            bits=bits,
            now=now,
            owner=client,
        )
        self._close_request: tuple[int, str] | None = None
        #: what the connection table counts this one as (server/connections.py's)
        self.counted = 0
        # the handshake is done: the welcome goes out now and is not kept
        welcome = welcome_for(config, host, port, permission_required, notice)
        self.outbox.put({"type": "welcome", "welcome": welcome})

    def connection_lost(self) -> None:
        """The transport is gone: leave the mailbox and drop what is still held.

        Once nothing of it is left to decide, its session lets go of it: the connection's
        objects are then in no reference cycle and are freed as soon as the last reference
        goes, not by a collection of the oldest generation, which a connection that lived
        through a few young collections would otherwise wait for (`server/run.py`).
        """
        done = self.ctx.decider.forget(self)
        self.outbox.stop()
        self.ctx.clients.detach(self)
        if done:
            self.session.handle = None

    def handle_frame(self, data: str | bytes) -> None:
        if self._close_request is not None:
            return  # closing: later frames are not served
        ctx = self.ctx
        try:
            msg = decode_frame(data)
        except FrameError as err:
            if err.ack:
                orig = err.orig if isinstance(err.orig, dict) else {}
                self.outbox.put({"type": "ack", "id": orig.get("id")})
            self.outbox.put(error_frame(err.explain, err.orig))
            ctx.events.refused(err.explain, self)
            ctx.events.bad_input.note("websocket", err.explain)
            return
        ctx.metrics.count_command(msg["type"])
        ctx.decider.submit(self, msg, data)

    def emit_run(self, decided: list[tuple[dict[str, Any], Step]]) -> None:
        """Send what a committed batch decided for this connection's commands, in order;
        their frames leave in one write. The batch's fork is the session now: counted."""
        self.ctx.clients.note(self)
        socket = self.socket
        socket.begin()
        try:
            for msg, step in decided:
                self._emit(msg, step, None)
        finally:
            socket.end()

    def heartbeat(self) -> None:
        """Ping when quiet for a sweep; drop when the last ping went unanswered."""
        self.socket.heartbeat()

    def bad_frame(self, kind: str) -> None:
        """A frame the WebSocket protocol refuses (the socket closes with its code)."""
        self.ctx.events.bad_input.note("websocket", kind)

    def deliver(self, frame: Frame) -> None:
        """Another side's message from any node (shared store)."""
        self.outbox.deliver(frame)

    def flooded(self, msg: dict[str, Any]) -> None:
        """More commands queued than the node takes: refused and closed, as a flood."""
        self.outbox.put(error_frame(TOO_MANY_COMMANDS, msg))
        self.ctx.events.refused(TOO_MANY_COMMANDS, self)
        self._close_request = (CLOSE_POLICY, TOO_MANY_COMMANDS)
        self.ctx.tasks.spawn(self.close(CLOSE_POLICY, TOO_MANY_COMMANDS))

    def deny(self, reason: str) -> bool:
        """A reload's rules deny this client now: the reason in an `error` (the CLIs
        print it and stop), then closed; nothing it sends from now on is acted on.
        False: it was closing already."""
        if self._close_request is not None:
            return False
        self.outbox.put({"type": "error", "error": reason, "orig": {}})
        self.ctx.metrics.denied_by_rule["mailbox"] += 1
        self.ctx.events.event("closing connection denied by a rule", self, reason=reason)
        self._close_request = (CLOSE_POLICY, reason)
        self.ctx.tasks.spawn(self.close(CLOSE_POLICY, close_reason(reason)))
        return True

    def emit(self, msg: dict[str, Any], step: Step, barrier: Barrier) -> None:
        """Send what a step decided: replies that wait for its writes wait for `barrier`
        (None: nothing is outstanding). The step may have changed the session: counted anew."""
        self.ctx.clients.note(self)
        self._emit(msg, step, barrier)

    def _emit(self, msg: dict[str, Any], step: Step, barrier: Barrier) -> None:
        ctx = self.ctx
        held = barrier if self._ack_waits(msg["type"], step) else None
        refused = False
        for frame in step.immediate:
            self.outbox.put(frame, held)
            if frame["type"] == "error":
                refused = True
                ctx.events.refused(frame["error"], self)
        if not refused and msg["type"] in _PERMISSION_TYPES:
            ctx.metrics.permissions["granted"] += 1
        for frame in step.after_commit:
            self.outbox.put(frame, barrier)
        if step.deliveries or step.replayed:
            self._deliver(step, barrier)
        if step.deliveries:
            ctx.metrics.messages += 1
        if step.close is not None:
            code, reason = step.close
            ctx.events.event(
                "closing connection", self, kind=f"close {code}", code=code, reason=reason
            )
            self._close_request = step.close
            ctx.tasks.spawn(self.close(code, reason))

    @staticmethod
    def _ack_waits(mtype: str, step: Step) -> bool:
        """Whether the ack waits for this step's commit and leaves with its reply.

        The reference acks, commits and replies in one callback, so its ack and reply
        leave in one write, after the commit: so do ours, one system call fewer per
        command. Not for `open`: it subscribes, and a message the subscription brings
        must not reach the client before the ack. Steps with neither writes nor a reply
        (ping, refusals) are acked at once; so is a `list` while nothing is outstanding
        (its reply then has nothing to wait for either).
        """
        return bool(step.effects or step.after_commit) and mtype != "open"

    def _deliver(self, step: Step, barrier: Barrier) -> None:
        """Messages to their readers (outbox.py says why other sides need not wait).

        The sender's echo is its confirmation that the message is stored: it waits for the
        commit, on every connection of the sender's side. Other sides' copies leave at
        once, unless the operator chose `--peer-delivery durable`. A replay on `open` is
        sent as one run in mailbox order: at once too, unless it holds this side's own
        messages (confirmations, after a reconnect); then it waits, and later messages
        wait behind it.
        """
        # `barrier` is None only when nothing at all is outstanding (submit said so)
        every_copy_waits = self.ctx.config.peer_delivery == "durable"
        side = self.session.side
        if step.load_bodies is not None:
            # some bodies are in the store only: the replay (and what follows) waits for them
            loaded = Commit()
            for frame in step.replayed:
                self.outbox.put(frame, loaded, pin=True)
            self.ctx.tasks.spawn(self._load_bodies(step.load_bodies, barrier, loaded))
        elif step.replayed:
            outbox = self.outbox
            if every_copy_waits or (
                barrier is not None and any(f["side"] == side for f in step.replayed)
            ):
                for frame in step.replayed:
                    outbox.put(frame, barrier, pin=True)
            else:
                for frame in step.replayed:
                    outbox.deliver(frame)
        for subscriber, frame in step.deliveries:
            assert isinstance(subscriber, Connection)
            # the echo waits on every connection of the sender's side (a stale one too)
            if every_copy_waits or subscriber.session.side == side:
                subscriber.outbox.put(frame, barrier)
            else:
                subscriber.outbox.deliver(frame)

    async def _load_bodies(
        self, load: tuple[str, str, dict[int, Frame]], barrier: Barrier, loaded: Commit
    ) -> None:
        app_id, mailbox_id, frames = load
        try:
            await self.ctx.storage.bodies.fill(app_id, mailbox_id, frames, barrier)
        except Exception as err:
            log.error("replay failed: %s", err)
            loaded.resolve(err)  # the outbox stops; the client reconnects and opens again
            timeout = self.ctx.config.shutdown_timeout
            await self.socket.close(CLOSE_INTERNAL_ERROR, "replay failed", timeout)
            return
        loaded.resolve()

    def fell_behind(self) -> None:
        """A write left more than BEHIND_BYTES unsent: the slow-reader sweep watches it."""
        self.ctx.clients.watch(self)

    def check_behind(self, now: float, timeout: float) -> bool:
        """Called by the sweep: drop the client if it has not kept up for `timeout` s.
        Whether it is still behind (dropped or caught up: False, the sweep forgets it)."""
        outbox = self.outbox
        if outbox.behind(now, timeout):
            outbox.drop_slow_reader()
        return outbox.behind_since is not None and not outbox.overflowed

    def _slow(self) -> None:
        """The client does not read: stop delivering, and drop it without waiting."""
        self.ctx.metrics.count_limit("slow reader")
        self.ctx.events.event("closing slow reader", self, kind="slow reader")
        self.ctx.decider.forget(self)
        self.ctx.clients.detach(self)  # it stops counting now, not when its socket is gone
        self.ctx.tasks.spawn(self._drop_slow())

    async def _drop_slow(self) -> None:
        # a client that does not read cannot receive a close frame: try briefly; `close`
        # then aborts, dropping the unread bytes a closing transport would wait to deliver
        await self.socket.close(CLOSE_POLICY, "client too slow", 2.0)

    async def close(self, code: int, reason: str) -> None:
        """Close after the queued frames went out (bounded by the shutdown timeout)."""
        timeout = self.ctx.config.shutdown_timeout
        await self.outbox.flush(timeout)
        await self.socket.close(code, reason, timeout)
