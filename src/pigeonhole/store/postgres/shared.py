"""Deciding commands against state loaded from a shared database (several nodes, one server).

With PostgreSQL the database is the truth, not any node's memory: a node decides a batch
of commands inside one transaction that first locks and loads what those commands read
(`channel.lock_and_load`, schema/postgres-upgrade-v1-v2.sql; its current form in
-v7-v8.sql, which reads each address's holdings from `channel.holdings`), builds a
`Rendezvous` of just those rows, and runs the same protocol core on it
(protocol/session.py, on a `Session.fork`). The effects it makes are written in the same
transaction. This module is the pure half: what to lock (`batch_spec`), the rendezvous
made of the loaded rows (`loaded_rendezvous`), and the extra writes a shared store needs
(`touches`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.bodies import BodyCache
from pigeonhole.protocol.channels import Nameplate, Randomness, Rendezvous
from pigeonhole.protocol.limits import Limits
from pigeonhole.protocol.nameplates import SHORT_LENGTHS
from pigeonhole.protocol.session import Wants
from pigeonhole.store.loading import StoredRows, load_state

#: a batch's loaded bodies are all kept for the batch (replays need every one)
_UNBOUNDED = 1 << 62


def batch_spec(wants: Iterable[Wants], owners: Iterable[str]) -> dict[str, Any]:
    """The JSON `channel.lock_and_load` takes for a batch of commands."""
    names: set[tuple[str, str]] = set()
    mailboxes: set[tuple[str, str]] = set()
    apps: set[str] = set()
    allocates: set[str] = set()
    bodies: set[tuple[str, str]] = set()
    seq = False
    for want in wants:
        names.update(want.names)
        mailboxes.update(want.mailboxes)
        apps.update(want.apps)
        allocates.update(want.allocates)
        bodies.update(want.bodies)
        seq = seq or want.seq
    return {
        "names": sorted(names),
        "mailboxes": sorted(mailboxes),
        "apps": sorted(apps),
        "allocates": sorted(allocates),
        "bodies": sorted(bodies),
        "owners": sorted(o for o in set(owners) if o),
        "seq": seq,
    }


class Cover:
    """What a batch's spec locked and loaded: a later command of a connection joins the
    batch only if what it reads is all here (server/node/batches.py)."""

    __slots__ = ("allocates", "apps", "bodies", "mailboxes", "names", "owners", "seq")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.names = {(a, n) for a, n in spec["names"]}
        self.mailboxes = {(a, m) for a, m in spec["mailboxes"]}
        self.apps = set(spec["apps"])
        self.allocates = set(spec.get("allocates", ()))
        self.bodies = {(a, m) for a, m in spec["bodies"]}
        self.owners = set(spec["owners"])
        self.seq: bool = spec["seq"]

    def covers(self, want: Wants, owner: str) -> bool:
        return (
            self.names.issuperset(want.names)
            and self.mailboxes.issuperset(want.mailboxes)
            and self.apps.issuperset(want.apps)
            and self.allocates.issuperset(want.allocates)
            and self.bodies.issuperset(want.bodies)
            and (not want.owner or not owner or owner in self.owners)
            and (not want.seq or self.seq)
        )


def loaded_rendezvous(
    loaded: dict[str, Any],
    now: float,
    randomness: Randomness,
    *,
    blur_time: int | None,
    limits: Limits,
    stored_bytes: int,
    disk_low: bool = False,
) -> Rendezvous:
    """A rendezvous holding the loaded rows, its quotas as the database counts them.

    Mailboxes keep their stored `updated` (pruning reads it). Nameplates of an app listed
    whole (allocate, list) that were not locked come as bare names: allocation only
    needs to know they are taken.
    """
    rz = Rendezvous(randomness, blur_time, limits, BodyCache(_UNBOUNDED, _UNBOUNDED))
    mailboxes = loaded["mailboxes"]
    load_state(
        rz,
        now,
        StoredRows(
            mailboxes=[row[:4] for row in mailboxes],
            mailbox_sides=loaded["mailbox_sides"],
            messages=loaded["messages"],
            nameplates=loaded["nameplates"],
            nameplate_sides=loaded["nameplate_sides"],
        ),
    )
    for app_id, mailbox_id, _, _, updated in mailboxes:
        mailbox = rz.mailbox(app_id, mailbox_id)
        if mailbox is not None:
            mailbox.updated = updated
    for app_id, name, mailbox_id in loaded["app_names"]:
        app = rz.app(app_id)
        if name not in app.nameplates:
            app.put_nameplate(Nameplate(name, mailbox_id))
    for allocating in loaded.get("allocates", ()):
        _short_names(rz, allocating)
    for seq, body in loaded["bodies"]:
        rz.bodies.put(seq, body)
    if loaded["seq"] is not None:
        rz.next_seq = loaded["seq"]
    ledger = rz.ledger
    for owner, nameplates, mailboxes_held, held_bytes in loaded["owners"]:
        ledger.nameplates_by[owner] = nameplates
        ledger.mailboxes_by[owner] = mailboxes_held
        ledger.bytes_by[owner] = held_bytes
    ledger.stored_bytes = stored_bytes
    ledger.disk_low = disk_low
    return rz


def _short_names(rz: Rendezvous, row: list[Any]) -> None:
    """What `channel.short_names` read for an app a nameplate is allocated in, as its
    `ShortNames`: the taken counts (committed rows; names this batch loaded are among
    them), lengths before the shortest with a free number listed as having none, that
    length's taken names (as bare nameplates) or free numbers (all of them, or since
    schema version 11 a uniform sample of as many as the batch wants: choosing from it
    is choosing from all), the same of the lengths after it read for the batch's
    `wanted` count, any length not read as having none free, and the drawn long numbers
    found free (read when the lengths read hold fewer free numbers than wanted)."""
    app_id, counts, shortest, kind, listed, long_free, *rest = row
    # [length, kind, names] of the lengths after the shortest that were read too (the
    # answer to a spec with `wanted`; version 7's has none)
    lengths = {shortest: (kind, listed)} if shortest else {}
    for more in rest[0] if rest else ():
        lengths[int(more[0])] = (more[1], more[2])
    app = rz.app(app_id)
    for read_kind, names in lengths.values():
        if read_kind == "taken":
            for name in names:
                if name not in app.nameplates:
                    app.put_nameplate(Nameplate(name, ""))
    short = app.short
    short.pinned = True
    short.taken = [int(c) for c in counts]
    for k, (low, high) in enumerate(SHORT_LENGTHS):
        read = lengths.get(k + 1)
        if read is None:
            # full before the shortest; after the lengths read, not read: no number of
            # such a length is chosen (one drawn blind could be a taken name)
            short.free[k] = []
            if shortest == 0 or k < shortest - 1:
                short.taken[k] = high - low
        elif read[0] == "free":
            short.free[k] = [int(n) for n in read[1]]
    short.long_free = list(long_free)


def touches(rz: Rendezvous, loaded: dict[str, Any], now: float) -> list[list[Any]]:
    """`touch` writes for the mailboxes this batch's commands used (the core sets their
    `updated` to `now`) and that were stored before: they stay alive (a new one is
    stored with `now` already). A single node keeps `updated` in memory; here whichever
    node prunes reads it from the database. `updated` has no index, so a touch is a
    heap-only update."""
    stored = {(row[0], row[1]): row[4] for row in loaded["mailboxes"]}
    writes = []
    for app in rz.apps.values():
        for mailbox in app.mailboxes.values():
            if mailbox.updated != now:
                continue
            before = stored.get((app.app_id, mailbox.id))
            if before is not None and before != now:
                writes.append(["touch", app.app_id, mailbox.id, now])
    return writes


def new_messages(effects: Iterable[fx.Effect]) -> list[fx.PutMessage]:
    return [e for e in effects if isinstance(e, fx.PutMessage)]
