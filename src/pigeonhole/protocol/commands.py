"""The command table: one row per client message type (reference §2.3-2.4).

A row holds everything the protocol knows about a command: its handler (validate the
message, change the session and the shared `Rendezvous`, fill the `Step`), what deciding
it reads of the shared state (`Wants`, for a store that locks and loads state per command
before deciding, store/postgres/shared.py), what it leaves for the later commands of a run when it
succeeds (so `Session.wants_run` can guess ahead), whether it is allowed before `bind`,
and whether it stores something (refused while the server's commits fail). A new command
is one row here; `Session` (session.py) holds a connection's state and looks rows up.

Per the spec, a direct response (`allocated`, `claimed`, `released`, `closed`,
`nameplates`) must not leave before its writes are committed: handlers put those in
`Step.after_commit`; the `pong` and errors, which need no commit, go in `Step.immediate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol import errors as e
from pigeonhole.protocol import limits as lim
from pigeonhole.protocol.channels import Mailbox
from pigeonhole.protocol.errors import ProtocolError
from pigeonhole.protocol.messages import client_version, hex_body, optional_string, string_field
from pigeonhole.protocol.nameplates import validate_nameplate
from pigeonhole.protocol.step import CLOSE_POLICY, Frame, Step, Wants
from pigeonhole.protocol.usage import blur

if TYPE_CHECKING:
    from pigeonhole.protocol.session import Session

PERMISSION_REQUIRED = "permission required: send submit-permissions before bind"


@dataclass(frozen=True, slots=True)
class Command:
    """One row of the table: how a command is decided and what deciding it reads."""

    #: validates the message, changes the session and the rendezvous, fills the step
    handler: Callable[[Session, Frame, float, Step], None]
    #: what the handler would read of the shared state (the session is bound: its app id)
    reads: Callable[[Session, Frame, str], Wants]
    #: sets on a guessed session what the command leaves when it succeeds
    leaves: Callable[[Session, Frame], None]
    #: allowed before `bind`
    before_bind: bool = False
    #: writes to the store: refused while the server's commits fail
    stores: bool = False


def command_of(msg: Frame) -> Command | None:
    """The row for a message's type, or None for a type the protocol does not know."""
    mtype = msg.get("type")
    return COMMANDS.get(mtype) if isinstance(mtype, str) else None


def _reads_nothing(session: Session, msg: Frame, app_id: str) -> Wants:
    return Wants()


def _leaves_nothing(guess: Session, msg: Frame) -> None:
    return None


def _bound_ids(session: Session) -> tuple[str, str]:
    assert session.app_id is not None and session.side is not None
    return session.app_id, session.side


# -- before bind --------------------------------------------------------------------


def _ping(session: Session, msg: Frame, now: float, step: Step) -> None:
    if "ping" not in msg:
        raise ProtocolError(e.PING_REQUIRES_PING)
    step.immediate.append({"type": "pong", "pong": msg["ping"]})


def _bind(session: Session, msg: Frame, now: float, step: Step) -> None:
    if session.bound:
        raise ProtocolError(e.ALREADY_BOUND)
    if "appid" not in msg:
        raise ProtocolError(e.BIND_REQUIRES_APPID)
    if "side" not in msg:
        raise ProtocolError(e.BIND_REQUIRES_SIDE)
    app_id = string_field(msg, "appid")
    side = string_field(msg, "side")
    if not session.granted:
        # spec 002: no acceptable submit-permissions -> "permission denied", close
        step.close = (CLOSE_POLICY, "permission required")
        raise ProtocolError(PERMISSION_REQUIRED)
    implementation, version = client_version(msg)
    session.app_id, session.side = app_id, side
    if session.rendezvous.ledger.storage_down:
        return  # bind stores only a usage row, which is not kept during an outage
    step.effects.append(
        fx.UsageClientVersion(app_id, side, blur(now, session.blur_time), implementation, version)
    )


def _bind_leaves(guess: Session, msg: Frame) -> None:
    if guess.app_id is None:
        app_id = msg.get("appid")
        guess.app_id = app_id if isinstance(app_id, str) else None


def _submit_permissions(session: Session, msg: Frame, now: float, step: Step) -> None:
    if session.bound:
        raise ProtocolError("submit-permissions must come before bind")
    if session.submitted:
        raise ProtocolError("permission already granted")
    if session.permissions is not None:
        try:
            session.permissions.check(
                msg.get("method"), msg.get("stamp"), session.resource, session.bits, now
            )
        except ProtocolError as err:
            raise ProtocolError(f"submit-permissions failed: {err.explain}") from None
    session.submitted = session.granted = True


# -- nameplates -----------------------------------------------------------------------


def _list(session: Session, msg: Frame, now: float, step: Step) -> None:
    app_id, _ = _bound_ids(session)
    names = session.rendezvous.list_nameplates(app_id) if session.allow_list else []
    step.after_commit.append({"type": "nameplates", "nameplates": [{"id": name} for name in names]})


def _list_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    return Wants(apps=[app_id])


def _allocate(session: Session, msg: Frame, now: float, step: Step) -> None:
    if session.allocated:
        raise ProtocolError(e.GREEDY)
    app_id, side = _bound_ids(session)
    _check_creations(session)
    name = session.rendezvous.allocate(app_id, side, now, step.effects, session.owner)
    _count_creations(session, step)
    session.allocated = True
    step.after_commit.append({"type": "allocated", "nameplate": name})


def _allocate_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    return Wants(allocates=[app_id], owner=True)


def _claim(session: Session, msg: Frame, now: float, step: Step) -> None:
    if "nameplate" not in msg:
        raise ProtocolError(e.CLAIM_REQUIRES_NAMEPLATE)
    if session.nameplate is not None:
        raise ProtocolError(e.ONE_CLAIM)
    name = validate_nameplate(msg["nameplate"])
    app_id, side = _bound_ids(session)
    _check_creations(session)
    try:
        mailbox_id = session.rendezvous.claim(app_id, name, side, now, step.effects, session.owner)
    finally:
        _count_creations(session, step)
    session.nameplate = name  # only after success (mailbox-server PR #38)
    step.after_commit.append({"type": "claimed", "mailbox": mailbox_id})


def _claim_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    name = msg.get("nameplate")
    return Wants(names=[(app_id, name)] if isinstance(name, str) else [], owner=True)


def _claim_leaves(guess: Session, msg: Frame) -> None:
    if isinstance(msg.get("nameplate"), str):
        guess.nameplate = msg["nameplate"]


def _release(session: Session, msg: Frame, now: float, step: Step) -> None:
    if session.released:
        raise ProtocolError(e.ONE_RELEASE)
    if "nameplate" in msg:
        name = string_field(msg, "nameplate")
        if session.nameplate is not None and name != session.nameplate:
            raise ProtocolError(e.RELEASE_SAME_NAMEPLATE)
    elif session.nameplate is None:
        raise ProtocolError(e.RELEASE_FOLLOWS_CLAIM)
    else:
        name = session.nameplate
    app_id, side = _bound_ids(session)
    session.rendezvous.release(app_id, name, side, now, step.effects)
    session.released = True
    step.after_commit.append({"type": "released"})


def _release_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    name = msg.get("nameplate", session.nameplate)
    return Wants(names=[(app_id, name)] if isinstance(name, str) else [])


# -- mailboxes ------------------------------------------------------------------------


def _open(session: Session, msg: Frame, now: float, step: Step) -> None:
    if session.mailbox is not None:
        raise ProtocolError(e.ONE_OPEN)
    if "mailbox" not in msg:
        raise ProtocolError(e.OPEN_REQUIRES_MAILBOX)
    mailbox_id = string_field(msg, "mailbox")
    app_id, side = _bound_ids(session)
    _check_creations(session)
    session.mailbox_id = mailbox_id
    try:
        mailbox = session.rendezvous.open(
            app_id, mailbox_id, side, now, step.effects, session.owner
        )
    finally:
        _count_creations(session, step)
    mailbox.subscribers[session.handle] = None
    session.mailbox = mailbox
    _replay(session, mailbox, (app_id, mailbox_id), step)


def _replay(session: Session, mailbox: Mailbox, ids: tuple[str, str], step: Step) -> None:
    """Stored messages first, in arrival order (later adds arrive live); a body not in
    the body cache is left for the server to load from the store."""
    if not mailbox.messages:
        return
    bodies = session.rendezvous.bodies
    missing: dict[int, Frame] = {}
    for message in mailbox.messages:
        body = bodies.get(message.seq)
        frame = message.to_wire(body)
        if body is None:
            missing[message.seq] = frame
        step.replayed.append(frame)
    if missing:
        step.load_bodies = (*ids, missing)


def _open_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    mailbox_id = msg.get("mailbox")
    if not isinstance(mailbox_id, str):
        return Wants(owner=True)
    return Wants(mailboxes=[(app_id, mailbox_id)], bodies=[(app_id, mailbox_id)], owner=True)


def _open_leaves(guess: Session, msg: Frame) -> None:
    if isinstance(msg.get("mailbox"), str):
        guess.mailbox_id = msg["mailbox"]
        guess.mailbox = Mailbox(msg["mailbox"], False, 0.0)


def _add(session: Session, msg: Frame, now: float, step: Step) -> None:
    mailbox = session.mailbox
    app_id, side = _bound_ids(session)
    if mailbox is not None:
        current = session.rendezvous.mailbox(app_id, mailbox.id)
        if current is None:
            # deleted meanwhile (every side closed it from other connections)
            session.disconnect()
        mailbox = current
    if mailbox is None:
        raise ProtocolError(e.ADD_NEEDS_OPEN)
    if "phase" not in msg:
        raise ProtocolError(e.MISSING_PHASE)
    if "body" not in msg:
        raise ProtocolError(e.MISSING_BODY)
    phase, body = string_field(msg, "phase"), hex_body(msg)
    _check_room(session, mailbox, len(body) // 2)
    frame, subscribers = session.rendezvous.add(
        mailbox, app_id, side, phase, body, now, msg.get("id"), step.effects, session.owner
    )
    for subscriber in subscribers:
        step.deliveries.append((subscriber, frame))


def _add_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    if session.mailbox is None:
        return Wants()
    return Wants(mailboxes=[(app_id, session.mailbox.id)], owner=True, seq=True)


def _close(session: Session, msg: Frame, now: float, step: Step) -> None:
    if session.closed:
        raise ProtocolError(e.ONE_CLOSE)
    if "mailbox" in msg:
        mailbox_id = string_field(msg, "mailbox")
        if session.mailbox_id is not None and mailbox_id != session.mailbox_id:
            raise ProtocolError(e.CLOSE_SAME_MAILBOX)
    elif session.mailbox_id is None:
        raise ProtocolError(e.CLOSE_FOLLOWS_OPEN)
    else:
        mailbox_id = session.mailbox_id
    mood = optional_string(msg, "mood")
    app_id, side = _bound_ids(session)
    session.disconnect()
    session.rendezvous.close(app_id, mailbox_id, side, mood, now, step.effects)
    session.closed = True
    step.after_commit.append({"type": "closed"})


def _close_reads(session: Session, msg: Frame, app_id: str) -> Wants:
    mailbox_id = msg.get("mailbox", session.mailbox_id)
    return Wants(mailboxes=[(app_id, mailbox_id)] if isinstance(mailbox_id, str) else [])


def _close_leaves(guess: Session, msg: Frame) -> None:
    guess.mailbox = None


# -- quotas -----------------------------------------------------------------------------


def _check_room(session: Session, mailbox: Mailbox, size: int) -> None:
    limits = session.limits
    if size > limits.max_body_bytes:
        raise ProtocolError(f"{lim.BODY_TOO_LARGE} ({size} > {limits.max_body_bytes} bytes)")
    if (
        len(mailbox.messages) >= limits.max_mailbox_messages
        or mailbox.size + size > limits.max_mailbox_bytes
    ):
        raise ProtocolError(lim.MAILBOX_FULL)


def _check_creations(session: Session) -> None:
    if session.created >= session.limits.max_creations:
        raise ProtocolError(lim.TOO_MANY_CREATED)


def _count_creations(session: Session, step: Step) -> None:
    made = sum(isinstance(x, fx.PutNameplate | fx.PutMailbox) for x in step.effects)
    session.created += made


_SUBMIT_PERMISSIONS = Command(
    _submit_permissions, _reads_nothing, _leaves_nothing, before_bind=True
)

#: message type -> its row, shared by every session
COMMANDS: dict[str, Command] = {
    "ping": Command(_ping, _reads_nothing, _leaves_nothing, before_bind=True),
    "bind": Command(_bind, _reads_nothing, _bind_leaves, before_bind=True),
    # the Rust client says "submit-permission"
    "submit-permissions": _SUBMIT_PERMISSIONS,
    "submit-permission": _SUBMIT_PERMISSIONS,
    "list": Command(_list, _list_reads, _leaves_nothing),
    "allocate": Command(_allocate, _allocate_reads, _leaves_nothing, stores=True),
    "claim": Command(_claim, _claim_reads, _claim_leaves, stores=True),
    "release": Command(_release, _release_reads, _leaves_nothing, stores=True),
    "open": Command(_open, _open_reads, _open_leaves, stores=True),
    "add": Command(_add, _add_reads, _leaves_nothing, stores=True),
    "close": Command(_close, _close_reads, _close_leaves, stores=True),
}
