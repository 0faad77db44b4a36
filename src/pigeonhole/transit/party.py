"""One connection's state in the core, and the step the core asks the I/O layer to take."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from pigeonhole.transit.endpoint import Endpoint
from pigeonhole.transit.handshake import LineBuffer
from pigeonhole.transit.limits import TokenBucket
from pigeonhole.transit.usage import Mood


class Phase(enum.Enum):
    HANDSHAKE = "handshake"
    WAITING = "waiting"
    PAIRED = "paired"
    DONE = "done"


class Party:
    """One connection's state in the core (the I/O layer holds it as `endpoint.party`)."""

    __slots__ = (
        "address",
        "bucket",
        "endpoint",
        "first",
        "last_active",
        "line",
        "mood",
        "opened",
        "partner",
        "peer",
        "phase",
        "sent",
        "side",
        "ticket",
        "token",
        "waiting_since",
    )

    def __init__(self, address: str, endpoint: Endpoint, now: float) -> None:
        self.address = address
        self.endpoint = endpoint
        self.opened = self.last_active = self.waiting_since = now
        self.phase = Phase.HANDSHAKE
        self.mood = Mood.EMPTY
        self.line: LineBuffer | None = LineBuffer()
        self.token: str | None = None
        self.side: str | None = None
        self.partner: Party | None = None
        self.first = False
        #: bytes this client sent that were relayed to its partner
        self.sent = 0
        self.bucket: TokenBucket | None = None
        #: a connection to another relay, carrying a client's side to its partner there
        self.peer = False
        #: this waiter's ticket in the shared directory (peers.py), once recorded there
        self.ticket: str | None = None


@dataclass(slots=True)
class Step:
    """What the I/O layer does next: (party, last line or b"") to close; a pair to join."""

    closes: list[tuple[Party, bytes]] = field(default_factory=list)
    #: the connection that just met its partner (`paired.partner`): send `ok` to both
    paired: Party | None = None
    #: bytes the newcomer sent after its handshake line, for the partner
    payload: bytes = b""
    #: False for a pair joined to another relay: `ok` comes from that relay
    greet: bool = True
