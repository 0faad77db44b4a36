"""The shared rendezvous state: apps, nameplates, mailboxes and their messages.

All state but message bodies lives in memory and is the truth the server answers from;
every change also appends the `effects` that make it durable, and the server sends
nothing that depends on a change before those effects are committed. Bodies live in the
store (as bytes), with a bounded cache of recent ones here (protocol/bodies.py), so memory
does not grow with what is stored. Every nameplate, mailbox and body is charged to the
client address that created it (protocol/ledger.py) until it is deleted. Semantics follow
the reference server except where noted: a mailbox is
keyed per app (no cross-app id clash), and pruned channels are dropped from memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.bodies import BodyCache
from pigeonhole.protocol.errors import CROWDED, RECLAIMED, ProtocolError
from pigeonhole.protocol.ledger import Ledger
from pigeonhole.protocol.limits import Limits
from pigeonhole.protocol.nameplates import Choose, RandBelow, ShortNames, find_free_nameplate
from pigeonhole.protocol.usage import blur, mailbox_result, nameplate_result, timing

Effects = list[fx.Effect]

#: distinct app ids counted in `Rendezvous.created_by_app` before the rest go to OTHER_APPS
#: (app ids come from clients: the count is bounded between two takes)
MAX_APPS_COUNTED = 256
OTHER_APPS = "(other apps)"
#: `Mailbox.nameplate` when more than one nameplate points at the mailbox (only loaded
#: rows could say so: a claim makes a new mailbox for each new nameplate)
SEVERAL = "*"


@dataclass(slots=True)
class NameplateSide:
    claimed: bool
    added: float


@dataclass(slots=True)
class Nameplate:
    name: str
    mailbox_id: str
    sides: dict[str, NameplateSide] = field(default_factory=dict)
    #: the client address charged for it ("" for nobody)
    owner: str = ""


@dataclass(slots=True)
class MailboxSide:
    opened: bool
    added: float
    mood: str | None = None


@dataclass(slots=True)
class Message:
    """A stored message without its body (the store has it; `Rendezvous.bodies` may).

    Not `frozen` (effects.py says why: a frozen `__init__` costs 5x); nothing changes one.
    """

    side: str
    phase: str
    server_rx: float
    msg_id: object
    #: decoded body bytes
    size: int
    #: the server's sequence number: arrival order, and the body's key in the store
    seq: int
    owner: str = ""

    def to_wire(self, body: str | None) -> dict[str, object]:
        return {
            "type": "message",
            "side": self.side,
            "phase": self.phase,
            "body": body,
            "server_rx": self.server_rx,
            "id": self.msg_id,
        }


@dataclass(slots=True)
class Mailbox:
    id: str
    for_nameplate: bool
    updated: float
    sides: dict[str, MailboxSide] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    #: decoded bytes of all message bodies (for the per-mailbox limit)
    size: int = 0
    #: opaque connection handles subscribed to live messages (insertion ordered)
    subscribers: dict[object, None] = field(default_factory=dict)
    #: the client address charged for it ("" for nobody)
    owner: str = ""
    #: the nameplate pointing here (SEVERAL: more than one), so closing the mailbox
    #: deletes it without looking at every nameplate
    nameplate: str | None = None


@dataclass(slots=True)
class App:
    """One app's nameplates and mailboxes.

    Nameplates come and go through `put_nameplate` and `drop_nameplate` only (read
    `nameplates` freely): they keep which short numbers are taken (`short`, for
    allocation) and each mailbox's nameplate (for its close).
    """

    app_id: str
    nameplates: dict[str, Nameplate] = field(default_factory=dict)
    mailboxes: dict[str, Mailbox] = field(default_factory=dict)
    short: ShortNames = field(default_factory=ShortNames)

    def is_empty(self) -> bool:
        """Nothing held; an app whose short numbers a store read (`pinned`) is kept: its
        names are not all here, so a fresh app would take numbers that are taken."""
        return not self.nameplates and not self.mailboxes and not self.short.pinned

    def put_nameplate(self, nameplate: Nameplate) -> Nameplate:
        """Add a nameplate (its name not yet here) and point its mailbox, if here, at it."""
        self.nameplates[nameplate.name] = nameplate
        self.short.add(nameplate.name)
        mailbox = self.mailboxes.get(nameplate.mailbox_id)
        if mailbox is not None:
            mailbox.nameplate = nameplate.name if mailbox.nameplate is None else SEVERAL
        return nameplate

    def drop_nameplate(self, name: str) -> Nameplate | None:
        nameplate = self.nameplates.pop(name, None)
        if nameplate is not None:
            self.short.remove(name)
            mailbox = self.mailboxes.get(nameplate.mailbox_id)
            if mailbox is not None and mailbox.nameplate == name:
                mailbox.nameplate = None
        return nameplate

    def nameplates_of(self, mailbox: Mailbox) -> list[Nameplate]:
        """The nameplates pointing at `mailbox`."""
        name = mailbox.nameplate
        if name is None:
            return []
        if name == SEVERAL:
            return [n for n in self.nameplates.values() if n.mailbox_id == mailbox.id]
        nameplate = self.nameplates.get(name)
        return [nameplate] if nameplate is not None and nameplate.mailbox_id == mailbox.id else []


@dataclass(frozen=True, slots=True)
class Randomness:
    """Where ids come from: the server passes `secrets`-backed functions."""

    choose: Choose
    randbelow: RandBelow
    mailbox_id: Callable[[], str]


class Rendezvous:
    """Every app's nameplates and mailboxes. Methods take `now` and an effects list.

    Methods that create something take the `owner` (client address) to charge, and check
    its quota before changing anything.
    """

    def __init__(
        self,
        randomness: Randomness,
        blur_time: int | None = None,
        limits: Limits | None = None,
        bodies: BodyCache | None = None,
    ) -> None:
        self.apps: dict[str, App] = {}
        self._random = randomness
        self._blur = blur_time
        self.ledger = Ledger(limits)
        self.bodies = bodies if bodies is not None else BodyCache()
        #: the next message's sequence number (the store's key for its body)
        self.next_seq = 1
        #: exchanges for operators (server/status.py samples them into per-minute rings):
        #: mailboxes created, finished mailboxes by usage result, and mailboxes created
        #: per app since the status sampler last took the counter (bounded)
        self.mailboxes_created = 0
        self.results: Counter[str] = Counter()
        self.created_by_app: Counter[str] = Counter()

    def _stored_owner(self, owner: str) -> str | None:
        """What the store keeps of an owner: nothing under --blur-usage."""
        return None if self._blur or not owner else owner

    def app(self, app_id: str) -> App:
        app = self.apps.get(app_id)
        if app is None:
            app = self.apps[app_id] = App(app_id)
        return app

    def _forget_if_empty(self, app: App) -> None:
        if app.is_empty():
            self.apps.pop(app.app_id, None)

    # -- nameplates ---------------------------------------------------------------

    def list_nameplates(self, app_id: str) -> list[str]:
        app = self.apps.get(app_id)
        return sorted(app.nameplates) if app else []

    def allocate(self, app_id: str, side: str, now: float, out: Effects, owner: str = "") -> str:
        app = self.apps.get(app_id)
        random = self._random
        if app is None:
            name = find_free_nameplate((), random.choose, random.randbelow)
        else:
            name = find_free_nameplate(app.nameplates, random.choose, random.randbelow, app.short)
        self.claim(app_id, name, side, now, out, owner)  # a free name: quotas checked there
        return name

    def claim(
        self, app_id: str, name: str, side: str, now: float, out: Effects, owner: str = ""
    ) -> str:
        """Claim (and open) a nameplate's mailbox for `side`; same side again is idempotent."""
        app = self.apps.get(app_id)
        nameplate = app.nameplates.get(name) if app is not None else None
        if nameplate is None:
            ledger = self.ledger
            ledger.check_nameplate(owner)
            ledger.check_mailbox(owner)
            app = self.app(app_id)
            mailbox_id = self._new_mailbox_id(app)
            self._create_mailbox(app, mailbox_id, True, now, out, owner)
            nameplate = app.put_nameplate(Nameplate(name, mailbox_id, owner=owner))
            ledger.charge_nameplate(owner)
            out.append(fx.PutNameplate(app_id, name, mailbox_id, self._stored_owner(owner)))
        mine = nameplate.sides.get(side)
        if mine is None:
            nameplate.sides[side] = NameplateSide(True, now)
            out.append(fx.PutNameplateSide(app_id, name, side, True, now))
        elif not mine.claimed:
            raise ProtocolError(RECLAIMED)
        # the server protocol: claiming a nameplate also opens its mailbox for this side
        self.open(app_id, nameplate.mailbox_id, side, now, out, owner)
        if len(nameplate.sides) > 2:
            raise ProtocolError(CROWDED)
        return nameplate.mailbox_id

    def release(self, app_id: str, name: str, side: str, now: float, out: Effects) -> None:
        """Unknown nameplate or side: a no-op that still answers `released` (reference)."""
        app = self.apps.get(app_id)
        nameplate = app.nameplates.get(name) if app else None
        if app is None or nameplate is None or side not in nameplate.sides:
            return
        mine = nameplate.sides[side]
        mine.claimed = False
        out.append(fx.PutNameplateSide(app_id, name, side, False, mine.added))
        if not any(s.claimed for s in nameplate.sides.values()):
            self._delete_nameplate(app, nameplate, now, False, out)

    def _delete_nameplate(
        self, app: App, nameplate: Nameplate, now: float, pruned: bool, out: Effects
    ) -> None:
        app.drop_nameplate(nameplate.name)
        self.ledger.refund_nameplate(nameplate.owner)
        out.append(fx.DeleteNameplate(app.app_id, nameplate.name))
        started, waiting, total = timing([s.added for s in nameplate.sides.values()], now)
        result = nameplate_result(len(nameplate.sides), pruned)
        out.append(fx.UsageNameplate(app.app_id, blur(started, self._blur), waiting, total, result))

    # -- mailboxes ----------------------------------------------------------------

    def _new_mailbox_id(self, app: App) -> str:
        while True:
            mailbox_id = self._random.mailbox_id()
            if mailbox_id not in app.mailboxes:
                return mailbox_id

    def _create_mailbox(
        self, app: App, mailbox_id: str, for_nameplate: bool, now: float, out: Effects, owner: str
    ) -> Mailbox:
        mailbox = app.mailboxes[mailbox_id] = Mailbox(mailbox_id, for_nameplate, now, owner=owner)
        self.ledger.charge_mailbox(owner)
        self.mailboxes_created += 1
        by_app, key = self.created_by_app, app.app_id
        if key not in by_app and len(by_app) >= MAX_APPS_COUNTED:
            key = OTHER_APPS
        by_app[key] += 1
        out.append(
            fx.PutMailbox(app.app_id, mailbox_id, for_nameplate, now, self._stored_owner(owner))
        )
        return mailbox

    def mailbox(self, app_id: str, mailbox_id: str) -> Mailbox | None:
        app = self.apps.get(app_id)
        return app.mailboxes.get(mailbox_id) if app else None

    def open(
        self, app_id: str, mailbox_id: str, side: str, now: float, out: Effects, owner: str = ""
    ) -> Mailbox:
        """Create the mailbox if unknown, add the side once; a third side is `crowded`."""
        app = self.apps.get(app_id)
        mailbox = app.mailboxes.get(mailbox_id) if app is not None else None
        if mailbox is None:
            self.ledger.check_mailbox(owner)
            app = self.app(app_id)
            mailbox = self._create_mailbox(app, mailbox_id, False, now, out, owner)
        if side not in mailbox.sides:
            mailbox.sides[side] = MailboxSide(True, now)
            out.append(fx.PutMailboxSide(app_id, mailbox_id, side, True, now, None))
        mailbox.updated = now
        if len(mailbox.sides) > 2:
            raise ProtocolError(CROWDED)
        return mailbox

    def add(
        self,
        mailbox: Mailbox,
        app_id: str,
        side: str,
        phase: str,
        body: str,
        now: float,
        msg_id: object,
        out: Effects,
        owner: str = "",
    ) -> tuple[dict[str, object], list[object]]:
        """Store a message (hex `body`), charged to `owner` after its quota check.

        Returns its `message` frame and the subscribers it goes to (echo included).
        """
        size = len(body) // 2
        self.ledger.check_body(owner, size)
        seq = self.next_seq
        self.next_seq = seq + 1
        message = Message(side, phase, now, msg_id, size, seq, owner)
        mailbox.messages.append(message)
        mailbox.size += size
        mailbox.updated = now
        self.ledger.charge_bytes(owner, size)
        self.bodies.put(seq, body)
        out.append(
            fx.PutMessage(
                app_id, mailbox.id, side, phase, body, now, msg_id, seq, self._stored_owner(owner)
            )
        )
        return message.to_wire(body), list(mailbox.subscribers)

    def close(
        self, app_id: str, mailbox_id: str, side: str, mood: str | None, now: float, out: Effects
    ) -> None:
        """Mark the side closed; delete everything once every side has closed.

        Unlike the reference, closing a mailbox this side never opened (or one that does
        not exist) is a no-op that answers `closed`: no phantom mailbox, no `crowded`
        reply to a close (mailbox-server issue #20).
        """
        app = self.apps.get(app_id)
        mailbox = app.mailboxes.get(mailbox_id) if app else None
        if app is None or mailbox is None or side not in mailbox.sides:
            return
        mine = mailbox.sides[side]
        mine.opened = False
        mine.mood = mood
        out.append(fx.PutMailboxSide(app_id, mailbox_id, side, False, mine.added, mood))
        if not any(s.opened for s in mailbox.sides.values()):
            self._delete_mailbox(app, mailbox, now, False, out)
            self._forget_if_empty(app)

    def _delete_mailbox(
        self, app: App, mailbox: Mailbox, now: float, pruned: bool, out: Effects
    ) -> None:
        # nameplates still pointing here go too (with a usage row, which the reference
        # skips), avoiding the reference's foreign-key failure on close (§2.6)
        for nameplate in app.nameplates_of(mailbox):
            self._delete_nameplate(app, nameplate, now, pruned, out)
        del app.mailboxes[mailbox.id]
        mailbox.subscribers.clear()
        ledger, bodies = self.ledger, self.bodies
        ledger.refund_mailbox(mailbox.owner)
        for message in mailbox.messages:
            ledger.refund_bytes(message.owner, message.size)
            bodies.drop(message.seq)
        out.append(fx.DeleteMailbox(app.app_id, mailbox.id))
        sides = mailbox.sides.values()
        started, waiting, total = timing([s.added for s in sides], now)
        result = mailbox_result(len(mailbox.sides), (s.mood for s in sides), pruned)
        self.results[result] += 1
        out.append(
            fx.UsageMailbox(
                app.app_id,
                mailbox.for_nameplate,
                blur(started, self._blur),
                waiting,
                total,
                result,
            )
        )

    # -- pruning ------------------------------------------------------------------

    def prune(self, now: float, expiry: float, out: Effects) -> int:
        """Delete channels untouched for `expiry` seconds; subscribed ones stay alive.

        Returns how many mailboxes were pruned. Nameplates follow their mailbox.
        """
        old = now - expiry
        pruned = 0
        for app in list(self.apps.values()):
            for mailbox in list(app.mailboxes.values()):
                if mailbox.subscribers:
                    mailbox.updated = now
                elif mailbox.updated < old:
                    self._delete_mailbox(app, mailbox, now, True, out)
                    pruned += 1
            self._forget_if_empty(app)
        return pruned

    def rebuild_ledger(self) -> None:
        """Charge everything held to its owner anew (after loading the state)."""
        ledger = self.ledger
        ledger.clear()
        for app in self.apps.values():
            for nameplate in app.nameplates.values():
                ledger.charge_nameplate(nameplate.owner)
            for mailbox in app.mailboxes.values():
                ledger.charge_mailbox(mailbox.owner)
                for message in mailbox.messages:
                    ledger.charge_bytes(message.owner, message.size)

    def counts(self) -> tuple[int, int]:
        """(nameplates, mailboxes) alive."""
        apps = self.apps.values()
        return sum(len(a.nameplates) for a in apps), sum(len(a.mailboxes) for a in apps)
