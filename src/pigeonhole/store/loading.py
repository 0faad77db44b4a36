"""Rebuilding the in-memory rendezvous state from stored rows, for every store.

Each store reads its own tables (SQLite, PostgreSQL) and hands the rows here in one
shape, so what a restart restores, and how quotas are charged again, is decided once.
Bodies are not loaded: a message row carries its body's size only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from pigeonhole.protocol.channels import (
    Mailbox,
    MailboxSide,
    Message,
    Nameplate,
    NameplateSide,
    Rendezvous,
)

Row = tuple[Any, ...]

#: the SELECT column lists each store reads, in the order `StoredRows` expects
MAILBOX_COLUMNS = "app_id, id, for_nameplate, owner"
MAILBOX_SIDE_COLUMNS = "app_id, mailbox_id, side, opened, added, mood"
#: ... then the body's size in bytes, which each store computes its own way
MESSAGE_COLUMNS_BEFORE_SIZE = "seq, app_id, mailbox_id, side, phase"
MESSAGE_COLUMNS_AFTER_SIZE = "server_rx, msg_id, owner"
NAMEPLATE_COLUMNS = "app_id, name, mailbox_id, owner"
NAMEPLATE_SIDE_COLUMNS = "app_id, name, side, claimed, added"


@dataclass
class StoredRows:
    """Every channel row, in the column orders above (messages ordered by `seq`)."""

    mailboxes: Iterable[Row]
    mailbox_sides: Iterable[Row]
    messages: Iterable[Row]
    nameplates: Iterable[Row]
    nameplate_sides: Iterable[Row]


#: maps a stored owner to the client it counts as now (pigeonhole/clients.py)
OwnerOf = Callable[[str], str]


def same_owner(owner: str) -> str:
    return owner


def load_state(
    rz: Rendezvous, now: float, rows: StoredRows, owner_of: OwnerOf = same_owner
) -> None:
    """Rebuild `rz`; every channel counts as touched `now` (the reconnect grace).

    Every row is charged to its owner again, so quotas per address survive a restart;
    `owner_of` regroups owners stored as full addresses or under another IPv6 prefix.
    """

    def owned(owner: str | None) -> str:
        return owner_of(owner) if owner else ""

    for app_id, mailbox_id, for_nameplate, owner in rows.mailboxes:
        rz.app(app_id).mailboxes[mailbox_id] = Mailbox(
            mailbox_id, bool(for_nameplate), now, owner=owned(owner)
        )
    for app_id, mailbox_id, side, opened, added, mood in rows.mailbox_sides:
        mailbox = rz.app(app_id).mailboxes.get(mailbox_id)
        if mailbox is not None:
            mailbox.sides[side] = MailboxSide(bool(opened), added, mood)
    last_seq = 0
    for seq, app_id, mailbox_id, side, phase, size, server_rx, msg_id, owner in rows.messages:
        last_seq = seq
        mailbox = rz.app(app_id).mailboxes.get(mailbox_id)
        if mailbox is not None:
            message = Message(side, phase, server_rx, orjson.loads(msg_id), size, seq, owned(owner))
            mailbox.messages.append(message)
            mailbox.size += size
    rz.next_seq = max(rz.next_seq, last_seq + 1)
    for app_id, name, mailbox_id, owner in rows.nameplates:
        app = rz.app(app_id)
        app.drop_nameplate(name)  # a name twice in the rows: the last one counts
        app.put_nameplate(Nameplate(name, mailbox_id, owner=owned(owner)))
    for app_id, name, side, claimed, added in rows.nameplate_sides:
        nameplate = rz.app(app_id).nameplates.get(name)
        if nameplate is not None:
            nameplate.sides[side] = NameplateSide(bool(claimed), added)
    for app in list(rz.apps.values()):
        if app.is_empty():
            del rz.apps[app.app_id]
    rz.rebuild_ledger()
