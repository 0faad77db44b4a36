"""One connection's protocol state (reference §2.3-2.4), free of I/O.

`Session.receive(msg, now)` looks the message's type up in the command table
(commands.py), whose handler validates it, applies it to the shared `Rendezvous` and
fills a `Step` (step.py): `immediate` frames (the `ack`, `pong`, errors), `after_commit`
frames (direct responses, which must not leave before their writes are committed),
`deliveries` and `replayed` `message`s, and the writes (`effects`). A replayed message
whose body is not in the body cache has `"body": None` and is listed in
`Step.load_bodies`, for the server to fill in from the store before it sends the replay.
The server decides which frames wait for the commit anyway (server/connection.py: acks
travel with their replies). `Session.wants` reads the same table for what a command
would read, for a store that locks state per command.
"""

from __future__ import annotations

from typing import Protocol

from pigeonhole.protocol import errors as e
from pigeonhole.protocol import limits as lim
from pigeonhole.protocol.channels import Mailbox, Rendezvous
from pigeonhole.protocol.commands import COMMANDS, command_of
from pigeonhole.protocol.errors import ProtocolError
from pigeonhole.protocol.limits import Limits, TokenBucket
from pigeonhole.protocol.step import CLOSE_POLICY, Frame, Step, Wants, error_frame

# the session and the records its callers use, all importable from here
__all__ = [
    "CLOSE_POLICY",
    "Frame",
    "PermissionCheck",
    "Session",
    "Step",
    "Wants",
    "error_frame",
]


class PermissionCheck(Protocol):
    """What a session asks of the server's permission policy (permissions/policy.py):
    protocol/ names only this shape, so it imports nothing from outside itself."""

    @property
    def open_to_all(self) -> bool:
        """Whether a client may bind without submitting a permission."""

    def check(self, method: object, stamp: object, resource: str, bits: int, now: float) -> None:
        """Return to grant the permission; raise ProtocolError saying why not."""


class Session:
    """One connection's state: who it is, what it may do, what it did.

    The command handlers (commands.py) read and write these attributes; the protocol
    allows at most one allocate, claim, release, open and close per connection.
    """

    # slots: one Session per connection, so its size is memory per idle connection
    __slots__ = (
        "_bucket",
        "allocated",
        "allow_list",
        "app_id",
        "bits",
        "blur_time",
        "closed",
        "created",
        "granted",
        "handle",
        "limits",
        "mailbox",
        "mailbox_id",
        "nameplate",
        "owner",
        "permissions",
        "released",
        "rendezvous",
        "resource",
        "side",
        "submitted",
    )

    def __init__(
        self,
        rendezvous: Rendezvous,
        handle: object,
        *,
        allow_list: bool = True,
        blur_time: int | None = None,
        limits: Limits | None = None,
        permissions: PermissionCheck | None = None,
        resource: str = "",
        bits: int = 0,
        now: float = 0.0,
        owner: str = "",
    ) -> None:
        self.rendezvous = rendezvous
        self.handle = handle
        #: the client's address: what it creates and stores is charged to it
        self.owner = owner
        self.allow_list = allow_list
        self.blur_time = blur_time
        self.limits = limits or Limits()
        self._bucket = TokenBucket(self.limits.commands_per_second, self.limits.command_burst, now)
        #: nameplates plus mailboxes this connection created
        self.created = 0
        self.permissions = permissions
        #: the hashcash resource and bits this connection was challenged with
        self.resource = resource
        self.bits = bits
        self.granted = permissions is None or permissions.open_to_all
        self.submitted = False
        self.app_id: str | None = None
        self.side: str | None = None
        self.allocated = False
        self.nameplate: str | None = None  # the nameplate this connection claimed
        self.released = False
        self.mailbox_id: str | None = None  # the mailbox this connection last opened
        self.mailbox: Mailbox | None = None  # open and subscribed
        self.closed = False

    @property
    def bound(self) -> bool:
        return self.app_id is not None

    def receive(self, msg: Frame, now: float) -> Step:
        """Handle one decoded message that has a string `type`."""
        step = Step()
        step.immediate.append({"type": "ack", "id": msg.get("id")})
        if not self._bucket.take(now):
            step.immediate.append(error_frame(lim.TOO_MANY_COMMANDS, msg))
            step.close = (CLOSE_POLICY, lim.TOO_MANY_COMMANDS)
            return step
        command = COMMANDS.get(msg["type"])
        try:
            if not self.bound and (command is None or not command.before_bind):
                raise ProtocolError(e.MUST_BIND_FIRST)
            if command is None:
                raise ProtocolError(e.UNKNOWN_TYPE)
            if command.stores and self.rendezvous.ledger.storage_down:
                raise ProtocolError(lim.STORAGE_DOWN)
            command.handler(self, msg, now, step)
        except ProtocolError as err:
            # effects made before the error (a crowded side's rows) are still committed
            step.immediate.append(error_frame(err.explain, msg))
        return step

    def wants(self, msg: Frame) -> Wants:
        """What `receive(msg)` would read of the shared state, without changing anything.

        A message the session will refuse anyway reads nothing; the refusal is decided by
        `receive` as usual.
        """
        command = command_of(msg)
        if command is None or self.app_id is None:
            return Wants()
        return command.reads(self, msg, self.app_id)

    def wants_run(self, msgs: list[Frame]) -> list[Wants]:
        """What a run of this connection's commands would read, each later one as if the
        earlier ones succeeded (a `bind` names the app, an `open` the mailbox `add` and
        `close` use). A guess, made before anything is decided: whoever decides the run
        checks each later command's `wants` again on the state the earlier ones really
        left (server/node/batches.py), so a wrong guess costs a batch, never a wrong read."""
        guess = self._copy()
        wants = []
        for msg in msgs:
            wants.append(guess.wants(msg))
            command = command_of(msg)
            if command is not None:
                command.leaves(guess, msg)
        return wants

    def fork(self, rendezvous: Rendezvous) -> Session:
        """A copy deciding against another (loaded) rendezvous: kept by `adopt` only if its
        writes commit, so a transaction that is rolled back and decided again is decided
        from this session's state as it was."""
        trial = self._copy()
        trial.rendezvous = rendezvous
        trial._bucket = self._bucket.copy()
        return trial

    def adopt(self, trial: Session) -> None:
        """Take a fork's state (its writes committed); this session keeps its rendezvous."""
        rendezvous = self.rendezvous
        for name in Session.__slots__:
            setattr(self, name, getattr(trial, name))
        self.rendezvous = rendezvous

    def disconnect(self) -> None:
        """The connection is gone: stop live delivery. Claims and opens stay (reference)."""
        if self.mailbox is not None:
            self.mailbox.subscribers.pop(self.handle, None)
            self.mailbox = None

    def _copy(self) -> Session:
        """Every attribute shared, the token bucket too (a fork takes its own)."""
        copy = Session.__new__(Session)
        for name in Session.__slots__:
            setattr(copy, name, getattr(self, name))
        return copy
