"""One connection's protocol state machine (reference §2.3-2.4), free of I/O.

`Session.receive(msg, now)` validates a decoded message, applies it to the shared
`Rendezvous`, and returns a `Step`. Per the spec, a direct response (`allocated`,
`claimed`, `released`, `closed`, `nameplates`) must not leave before its writes are
committed: those go in `Step.after_commit`; the `ack`, `pong` and errors, which need
no commit, go in `Step.immediate`. `message`s (to subscribers on `add`, stored ones on
`open`) go in `Step.deliveries` and `Step.replayed`; a replayed message whose body is
not in the body cache has `"body": None` and is listed in `Step.load_bodies`, for the
server to fill in from the store before it sends the replay. The server decides which
frames wait for the commit anyway (server/connection.py: acks travel with their replies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol import errors as e
from pigeonhole.protocol import limits as lim
from pigeonhole.protocol.channels import Mailbox, Rendezvous
from pigeonhole.protocol.errors import ProtocolError
from pigeonhole.protocol.limits import Limits, TokenBucket
from pigeonhole.protocol.messages import (
    client_version,
    hex_body,
    optional_string,
    string_field,
)
from pigeonhole.protocol.nameplates import validate_nameplate
from pigeonhole.protocol.usage import blur

if TYPE_CHECKING:
    from pigeonhole.permissions.policy import PermissionPolicy

Frame = dict[str, Any]

#: WebSocket close code for a client that broke a rule (RFC 6455: policy violation)
CLOSE_POLICY = 1008


@dataclass(slots=True)
class Step:
    """What one client message leads to."""

    immediate: list[Frame] = field(default_factory=list)
    after_commit: list[Frame] = field(default_factory=list)
    effects: list[fx.Effect] = field(default_factory=list)
    #: (subscriber handle, frame): the `message` of an `add` for each subscriber
    deliveries: list[tuple[object, Frame]] = field(default_factory=list)
    #: the mailbox's stored messages, in order, sent to this client on `open`
    replayed: list[Frame] = field(default_factory=list)
    #: (app id, mailbox id, {seq: frame}): replayed frames whose body is in the store only
    load_bodies: tuple[str, str, dict[int, Frame]] | None = None
    #: close the connection after sending: (code, reason)
    close: tuple[int, str] | None = None
    #: the number of the last message `replayed` (set by a store that needs it)
    replayed_up_to: int = 0


@dataclass(slots=True)
class Wants:
    """The shared state one command reads (what a store that loads state per command,
    store/shared.py, must lock and load before the command is decided)."""

    #: nameplates by name, and mailboxes by id (with the nameplates pointing at them)
    names: list[tuple[str, str]] = field(default_factory=list)
    mailboxes: list[tuple[str, str]] = field(default_factory=list)
    #: apps whose every nameplate name is read (allocate, list)
    apps: list[str] = field(default_factory=list)
    #: mailboxes whose stored bodies are replayed (open)
    bodies: list[tuple[str, str]] = field(default_factory=list)
    #: the quotas of this connection's address are checked; a message number is needed
    owner: bool = False
    seq: bool = False


def error_frame(explain: str, orig: object) -> Frame:
    return {"type": "error", "error": explain, "orig": orig}


#: message types allowed before `bind`; the Rust client says "submit-permission"
_PERMISSION_TYPES = frozenset({"submit-permissions", "submit-permission"})
_UNBOUND_TYPES = frozenset({"ping", "bind"}) | _PERMISSION_TYPES
#: commands refused while the server's commits fail: each would store something
_STORING_TYPES = frozenset({"allocate", "claim", "release", "open", "add", "close"})
PERMISSION_REQUIRED = "permission required: send submit-permissions before bind"


class Session:
    """Per-connection flags: at most one allocate/claim/release/open/close each."""

    # slots: one Session per connection, so its size is memory per idle connection
    __slots__ = (
        "_allocated",
        "_allow_list",
        "_bits",
        "_blur",
        "_bucket",
        "_closed",
        "_created",
        "_granted",
        "_limits",
        "_mailbox_id",
        "_nameplate",
        "_owner",
        "_permissions",
        "_released",
        "_resource",
        "_rz",
        "_submitted",
        "app_id",
        "handle",
        "mailbox",
        "side",
    )

    def __init__(
        self,
        rendezvous: Rendezvous,
        handle: object,
        *,
        allow_list: bool = True,
        blur_time: int | None = None,
        limits: Limits | None = None,
        permissions: PermissionPolicy | None = None,
        resource: str = "",
        bits: int = 0,
        now: float = 0.0,
        owner: str = "",
    ) -> None:
        self._rz = rendezvous
        self.handle = handle
        #: the client's address: what it creates and stores is charged to it
        self._owner = owner
        self._allow_list = allow_list
        self._blur = blur_time
        self._limits = limits or Limits()
        self._bucket = TokenBucket(
            self._limits.commands_per_second, self._limits.command_burst, now
        )
        self._created = 0
        self._permissions = permissions
        self._resource = resource
        self._bits = bits
        self._granted = permissions is None or permissions.open_to_all
        self._submitted = False
        self.app_id: str | None = None
        self.side: str | None = None
        self._allocated = False
        self._nameplate: str | None = None  # the nameplate this connection claimed
        self._released = False
        self._mailbox_id: str | None = None  # the mailbox this connection last opened
        self.mailbox: Mailbox | None = None  # open and subscribed
        self._closed = False

    @property
    def bound(self) -> bool:
        return self.app_id is not None

    def receive(self, msg: dict[str, Any], now: float) -> Step:
        """Handle one decoded message that has a string `type`."""
        step = Step()
        step.immediate.append({"type": "ack", "id": msg.get("id")})
        mtype: str = msg["type"]
        if not self._bucket.take(now):
            step.immediate.append(error_frame(lim.TOO_MANY_COMMANDS, msg))
            step.close = (CLOSE_POLICY, lim.TOO_MANY_COMMANDS)
            return step
        try:
            if not self.bound and mtype not in _UNBOUND_TYPES:
                raise ProtocolError(e.MUST_BIND_FIRST)
            handler = _HANDLERS.get(mtype)
            if handler is None:
                raise ProtocolError(e.UNKNOWN_TYPE)
            if self._rz.ledger.storage_down and mtype in _STORING_TYPES:
                raise ProtocolError(lim.STORAGE_DOWN)
            handler(self, msg, now, step)
        except ProtocolError as err:
            # effects made before the error (a crowded side's rows) are still committed
            step.immediate.append(error_frame(err.explain, msg))
        return step

    def wants(self, msg: dict[str, Any]) -> Wants:
        """What `receive(msg)` would read of the shared state, without changing anything.

        A message the session will refuse anyway reads nothing; the refusal is decided by
        `receive` as usual.
        """
        want = Wants()
        app_id, mtype = self.app_id, msg.get("type")
        if app_id is None:
            return want
        if mtype == "list":
            want.apps.append(app_id)
        elif mtype == "allocate":
            want.apps.append(app_id)
            want.owner = True
        elif mtype in ("claim", "release"):
            name = msg.get("nameplate", self._nameplate if mtype == "release" else None)
            if isinstance(name, str):
                want.names.append((app_id, name))
            want.owner = mtype == "claim"
        elif mtype in ("open", "close"):
            mailbox_id = msg.get("mailbox", self._mailbox_id if mtype == "close" else None)
            if isinstance(mailbox_id, str):
                want.mailboxes.append((app_id, mailbox_id))
                if mtype == "open":
                    want.bodies.append((app_id, mailbox_id))
            want.owner = mtype == "open"
        elif mtype == "add" and self.mailbox is not None:
            want.mailboxes.append((app_id, self.mailbox.id))
            want.owner = want.seq = True
        return want

    def wants_run(self, msgs: list[dict[str, Any]]) -> list[Wants]:
        """What a run of this connection's commands would read, each later one as if the
        earlier ones succeeded (a `bind` names the app, an `open` the mailbox `add` and
        `close` use). A guess, made before anything is decided: whoever decides the run
        checks each later command's `wants` again on the state the earlier ones really
        left (server/cluster.py), so a wrong guess costs a batch, never a wrong read."""
        guess = Session.__new__(Session)
        for name in Session.__slots__:
            setattr(guess, name, getattr(self, name))
        wants = []
        for msg in msgs:
            wants.append(guess.wants(msg))
            mtype = msg.get("type")
            if mtype == "bind" and guess.app_id is None:
                app_id = msg.get("appid")
                guess.app_id = app_id if isinstance(app_id, str) else None
            elif mtype == "claim" and isinstance(msg.get("nameplate"), str):
                guess._nameplate = msg["nameplate"]
            elif mtype == "open" and isinstance(msg.get("mailbox"), str):
                guess._mailbox_id = msg["mailbox"]
                guess.mailbox = Mailbox(msg["mailbox"], False, 0.0)
            elif mtype == "close":
                guess.mailbox = None
        return wants

    def fork(self, rendezvous: Rendezvous) -> Session:
        """A copy deciding against another (loaded) rendezvous: kept by `adopt` only if its
        writes commit, so a transaction that is rolled back and decided again is decided
        from this session's state as it was."""
        trial = Session.__new__(Session)
        for name in Session.__slots__:
            setattr(trial, name, getattr(self, name))
        trial._rz = rendezvous
        trial._bucket = self._bucket.copy()
        return trial

    def adopt(self, trial: Session) -> None:
        """Take a fork's state (its writes committed); this session keeps its rendezvous."""
        rendezvous = self._rz
        for name in Session.__slots__:
            setattr(self, name, getattr(trial, name))
        self._rz = rendezvous

    def disconnect(self) -> None:
        """The connection is gone: stop live delivery. Claims and opens stay (reference)."""
        if self.mailbox is not None:
            self.mailbox.subscribers.pop(self.handle, None)
            self.mailbox = None

    # -- handlers -----------------------------------------------------------------

    def _ping(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if "ping" not in msg:
            raise ProtocolError(e.PING_REQUIRES_PING)
        step.immediate.append({"type": "pong", "pong": msg["ping"]})

    def _bind(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if self.bound:
            raise ProtocolError(e.ALREADY_BOUND)
        if "appid" not in msg:
            raise ProtocolError(e.BIND_REQUIRES_APPID)
        if "side" not in msg:
            raise ProtocolError(e.BIND_REQUIRES_SIDE)
        app_id = string_field(msg, "appid")
        side = string_field(msg, "side")
        if not self._granted:
            # spec 002: no acceptable submit-permissions -> "permission denied", close
            step.close = (CLOSE_POLICY, "permission required")
            raise ProtocolError(PERMISSION_REQUIRED)
        implementation, version = client_version(msg)
        self.app_id, self.side = app_id, side
        if self._rz.ledger.storage_down:
            return  # bind stores only a usage row, which is not kept during an outage
        step.effects.append(
            fx.UsageClientVersion(app_id, side, blur(now, self._blur), implementation, version)
        )

    def _submit_permissions(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if self.bound:
            raise ProtocolError("submit-permissions must come before bind")
        if self._submitted:
            raise ProtocolError("permission already granted")
        if self._permissions is not None:
            try:
                self._permissions.check(
                    msg.get("method"), msg.get("stamp"), self._resource, self._bits, now
                )
            except ProtocolError as err:
                raise ProtocolError(f"submit-permissions failed: {err.explain}") from None
        self._submitted = self._granted = True

    def _ids(self) -> tuple[str, str]:
        assert self.app_id is not None and self.side is not None
        return self.app_id, self.side

    def _list(self, msg: dict[str, Any], now: float, step: Step) -> None:
        app_id, _ = self._ids()
        names = self._rz.list_nameplates(app_id) if self._allow_list else []
        step.after_commit.append(
            {"type": "nameplates", "nameplates": [{"id": name} for name in names]}
        )

    def _allocate(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if self._allocated:
            raise ProtocolError(e.GREEDY)
        app_id, side = self._ids()
        self._check_creations()
        name = self._rz.allocate(app_id, side, now, step.effects, self._owner)
        self._count_creations(step)
        self._allocated = True
        step.after_commit.append({"type": "allocated", "nameplate": name})

    def _claim(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if "nameplate" not in msg:
            raise ProtocolError(e.CLAIM_REQUIRES_NAMEPLATE)
        if self._nameplate is not None:
            raise ProtocolError(e.ONE_CLAIM)
        name = validate_nameplate(msg["nameplate"])
        app_id, side = self._ids()
        self._check_creations()
        try:
            mailbox_id = self._rz.claim(app_id, name, side, now, step.effects, self._owner)
        finally:
            self._count_creations(step)
        self._nameplate = name  # only after success (mailbox-server PR #38)
        step.after_commit.append({"type": "claimed", "mailbox": mailbox_id})

    def _release(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if self._released:
            raise ProtocolError(e.ONE_RELEASE)
        if "nameplate" in msg:
            name = string_field(msg, "nameplate")
            if self._nameplate is not None and name != self._nameplate:
                raise ProtocolError(e.RELEASE_SAME_NAMEPLATE)
        elif self._nameplate is None:
            raise ProtocolError(e.RELEASE_FOLLOWS_CLAIM)
        else:
            name = self._nameplate
        app_id, side = self._ids()
        self._rz.release(app_id, name, side, now, step.effects)
        self._released = True
        step.after_commit.append({"type": "released"})

    def _open(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if self.mailbox is not None:
            raise ProtocolError(e.ONE_OPEN)
        if "mailbox" not in msg:
            raise ProtocolError(e.OPEN_REQUIRES_MAILBOX)
        mailbox_id = string_field(msg, "mailbox")
        app_id, side = self._ids()
        self._check_creations()
        self._mailbox_id = mailbox_id
        try:
            mailbox = self._rz.open(app_id, mailbox_id, side, now, step.effects, self._owner)
        finally:
            self._count_creations(step)
        mailbox.subscribers[self.handle] = None
        self.mailbox = mailbox
        # stored messages first, in arrival order; later adds arrive live
        if not mailbox.messages:
            return
        bodies = self._rz.bodies
        missing: dict[int, Frame] = {}
        for message in mailbox.messages:
            body = bodies.get(message.seq)
            frame = message.to_wire(body)
            if body is None:
                missing[message.seq] = frame
            step.replayed.append(frame)
        if missing:
            step.load_bodies = (app_id, mailbox_id, missing)

    def _add(self, msg: dict[str, Any], now: float, step: Step) -> None:
        mailbox = self.mailbox
        app_id, side = self._ids()
        if mailbox is not None:
            current = self._rz.mailbox(app_id, mailbox.id)
            if current is None:
                # deleted meanwhile (every side closed it from other connections)
                self.disconnect()
            mailbox = current
        if mailbox is None:
            raise ProtocolError(e.ADD_NEEDS_OPEN)
        if "phase" not in msg:
            raise ProtocolError(e.MISSING_PHASE)
        if "body" not in msg:
            raise ProtocolError(e.MISSING_BODY)
        phase, body = string_field(msg, "phase"), hex_body(msg)
        self._check_room(mailbox, len(body) // 2)
        frame, subscribers = self._rz.add(
            mailbox, app_id, side, phase, body, now, msg.get("id"), step.effects, self._owner
        )
        for subscriber in subscribers:
            step.deliveries.append((subscriber, frame))

    def _check_room(self, mailbox: Mailbox, size: int) -> None:
        limits = self._limits
        if size > limits.max_body_bytes:
            raise ProtocolError(f"{lim.BODY_TOO_LARGE} ({size} > {limits.max_body_bytes} bytes)")
        if (
            len(mailbox.messages) >= limits.max_mailbox_messages
            or mailbox.size + size > limits.max_mailbox_bytes
        ):
            raise ProtocolError(lim.MAILBOX_FULL)

    def _check_creations(self) -> None:
        if self._created >= self._limits.max_creations:
            raise ProtocolError(lim.TOO_MANY_CREATED)

    def _count_creations(self, step: Step) -> None:
        self._created = (
            sum(isinstance(x, fx.PutNameplate | fx.PutMailbox) for x in step.effects)
            + self._created
        )

    def _close(self, msg: dict[str, Any], now: float, step: Step) -> None:
        if self._closed:
            raise ProtocolError(e.ONE_CLOSE)
        if "mailbox" in msg:
            mailbox_id = string_field(msg, "mailbox")
            if self._mailbox_id is not None and mailbox_id != self._mailbox_id:
                raise ProtocolError(e.CLOSE_SAME_MAILBOX)
        elif self._mailbox_id is None:
            raise ProtocolError(e.CLOSE_FOLLOWS_OPEN)
        else:
            mailbox_id = self._mailbox_id
        mood = optional_string(msg, "mood")
        app_id, side = self._ids()
        self.disconnect()
        self._rz.close(app_id, mailbox_id, side, mood, now, step.effects)
        self._closed = True
        step.after_commit.append({"type": "closed"})


#: message type -> handler, shared by every session (one dict, not one per connection)
_HANDLERS: dict[str, Callable[[Session, dict[str, Any], float, Step], None]] = {
    "ping": Session._ping,
    "bind": Session._bind,
    "list": Session._list,
    "allocate": Session._allocate,
    "claim": Session._claim,
    "release": Session._release,
    "open": Session._open,
    "add": Session._add,
    "close": Session._close,
    "submit-permissions": Session._submit_permissions,
    "submit-permission": Session._submit_permissions,
}
