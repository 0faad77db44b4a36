"""Writes a protocol step asks for; the store turns each into SQL in one transaction.

Only what a restart needs is written: nameplates, mailboxes, their sides and messages,
plus the usage records. Liveness (`updated`) stays in memory: after a restart every
channel gets a fresh expiry window, which is the reconnect grace period.

Not `frozen`: a frozen dataclass's `__init__` sets each field through
`object.__setattr__`, 2.1 µs for a seven-field effect against 0.4 µs, and an exchange
makes about 22 effects. Nothing changes an effect once made.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PutNameplate:
    app_id: str
    name: str
    mailbox_id: str
    #: the creating client's address (None under --blur-usage)
    owner: str | None = None


@dataclass(slots=True)
class DeleteNameplate:
    """Deletes the nameplate and its sides."""

    app_id: str
    name: str


@dataclass(slots=True)
class PutNameplateSide:
    """Inserts or replaces one side's claim on a nameplate."""

    app_id: str
    name: str
    side: str
    claimed: bool
    added: float


@dataclass(slots=True)
class PutMailbox:
    app_id: str
    mailbox_id: str
    for_nameplate: bool
    created: float
    owner: str | None = None


@dataclass(slots=True)
class DeleteMailbox:
    """Deletes the mailbox, its sides and its messages."""

    app_id: str
    mailbox_id: str


@dataclass(slots=True)
class PutMailboxSide:
    """Inserts or replaces one side's row on a mailbox."""

    app_id: str
    mailbox_id: str
    side: str
    opened: bool
    added: float
    mood: str | None


@dataclass(slots=True)
class PutMessage:
    app_id: str
    mailbox_id: str
    side: str
    phase: str
    #: hex, as sent; stored as the bytes it spells
    body: str
    server_rx: float
    msg_id: object
    #: the server's sequence number (the row's key; a retried batch replaces, not doubles)
    seq: int
    owner: str | None = None


@dataclass(slots=True)
class UsageNameplate:
    app_id: str
    started: float
    waiting_time: float | None
    total_time: float
    result: str


@dataclass(slots=True)
class UsageMailbox:
    app_id: str
    for_nameplate: bool
    started: float
    waiting_time: float | None
    total_time: float
    result: str


@dataclass(slots=True)
class UsageClientVersion:
    app_id: str
    side: str
    connect_time: float
    implementation: str | None
    version: str | None


@dataclass(slots=True)
class UsageConnectionCount:
    sampled: float
    connections: int
    bound: int
    subscribed: int
    nameplates: int
    mailboxes: int
    rebooted: float
    blur_time: int | None


@dataclass(slots=True)
class UsageTransit:
    """One transit relay record, with the reference relay's fields (its `usage` row).

    `started` is epoch seconds (blurred by the relay under --blur-usage), `waiting_time`
    None when the connection never paired, `total_bytes` both directions, `result` the
    mood (happy, lonely, redundant, errory, impatient, empty, jilted).
    """

    started: float
    total_time: float
    waiting_time: float | None
    total_bytes: int
    result: str


Effect = (
    PutNameplate
    | DeleteNameplate
    | PutNameplateSide
    | PutMailbox
    | DeleteMailbox
    | PutMailboxSide
    | PutMessage
    | UsageNameplate
    | UsageMailbox
    | UsageClientVersion
    | UsageConnectionCount
    | UsageTransit
)
