"""What one client message leads to (`Step`) and what deciding it reads (`Wants`).

Both are plain records: the command handlers (commands.py) fill them, the server sends a
step's frames and writes its effects, and a store that locks state per command
(store/postgres/shared.py) turns `Wants` into what it locks and loads before deciding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pigeonhole.protocol import effects as fx

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
    store/postgres/shared.py, must lock and load before the command is decided)."""

    #: nameplates by name, and mailboxes by id (with the nameplates pointing at them)
    names: list[tuple[str, str]] = field(default_factory=list)
    mailboxes: list[tuple[str, str]] = field(default_factory=list)
    #: apps whose every nameplate name is read (list)
    apps: list[str] = field(default_factory=list)
    #: apps a nameplate is allocated in: which short numbers are taken (ShortNames)
    allocates: list[str] = field(default_factory=list)
    #: mailboxes whose stored bodies are replayed (open)
    bodies: list[tuple[str, str]] = field(default_factory=list)
    #: the quotas of this connection's address are checked; a message number is needed
    owner: bool = False
    seq: bool = False


def error_frame(explain: str, orig: object) -> Frame:
    return {"type": "error", "error": explain, "orig": orig}
