"""Deciding a batch of commands in one transaction of the shared database.

The node takes the next run of commands of every ready connection (server/node/queues.py)
and decides them together (store/postgres/store.py `decide`): lock and load what they read, run
each on a `Session.fork` against a `Rendezvous` of those rows (store/postgres/shared.py), the same
protocol core as on SQLite, write the effects, NOTIFY, commit. Only then do replies leave
and the forks become the sessions' state. A batch that collides with another node's (two
nodes made the same nameplate; a deadlock) is rolled back and decided again from fresh
rows: the forks are dropped, so nothing was decided twice. A database that fails keeps the
commands queued (retried with a doubling pause) and answers nothing: no reply without its
commit. A command the database refuses for its content gets an `error` alone, its batch
decided again without it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Collection
from functools import partial
from typing import Any

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Mailbox, Nameplate, Randomness, Rendezvous
from pigeonhole.protocol.session import Session, Step, Wants
from pigeonhole.server.core import Core
from pigeonhole.server.deciding import Member
from pigeonhole.server.node.figures import Figures
from pigeonhole.server.node.notifications import Notifications, note, payloads
from pigeonhole.server.node.queues import Batch, Queues
from pigeonhole.server.node.refusals import NOT_STORED, REFUSE, refusal
from pigeonhole.store.errors import Conflict, Refused, StoreError
from pigeonhole.store.group_commit import RETRY_FIRST, RETRY_MAX
from pigeonhole.store.postgres import PostgresStore, encode_effects, encode_rows
from pigeonhole.store.postgres.shared import (
    Cover,
    batch_spec,
    new_messages,
    touches,
)

log = logging.getLogger("pigeonhole.node")

#: long numbers drawn per `allocate` before the batch reads, at most (the chance that all
#: eight are taken is below 3e-6 until a fifth of 1000-999999 is; then the core draws more
#: and a taken one is a collision, decided again)
LONG_DRAWS = 8
#: how many long numbers there are (1000-999999)
LONG_NUMBERS = 1000000 - 1000
#: the chance, at most, that an `allocate` past 999 collides: every number drawn for it
#: is taken, and so is the one the core then draws blind
LONG_COLLISION = 1e-6


def long_draws(nameplates: int) -> int:
    """Long numbers to draw for an `allocate` when the database holds `nameplates` (every
    app's, the totals each tick reads): as few as keep LONG_COLLISION even were they all
    long numbers of this app, at most LONG_DRAWS. Each drawn number is one index lookup
    in the batch, whether the shortest lengths have room or not; beside a crowd of 15,000
    this is 3, beside none 1."""
    share = min(nameplates, LONG_NUMBERS) / LONG_NUMBERS
    if share <= LONG_COLLISION:
        return 1
    if share >= 1.0:
        return LONG_DRAWS
    return max(1, min(LONG_DRAWS, math.ceil(math.log(LONG_COLLISION) / math.log(share)) - 1))


#: what a batch decided: the rendezvous of its rows, and each connection's fork and steps
Outcome = tuple[Rendezvous, list[tuple[Session, list[Step]]]]


class Batches:
    def __init__(
        self,
        node_id: str,
        host: Core,
        store: PostgresStore,
        randomness: Randomness,
        parts: tuple[Queues, Notifications, Figures],
    ) -> None:
        self._id = node_id
        self._host = host
        self._store = store
        self._random = randomness
        self._queues, self._notes, self._figures = parts
        #: nameplates this node's running batches are making (see `_run`)
        self._reserved: set[tuple[str, str]] = set()
        self._failing = False

    async def decide(self, batch: Batch, ready: Collection[Member] = ()) -> None:
        """Decide and commit a batch, then send its replies (`ready`: the connections
        waiting for the next batch)."""
        for conn, run in batch:
            if run[0]["type"] == REFUSE:
                orig = run[0]["orig"]
                conn.emit_run([(orig, refusal(orig, run[0]["error"]))])
        batch = [(c, run) for c, run in batch if run[0]["type"] != REFUSE]
        if not batch:
            return
        wants, owners = self._guess(batch)
        spec = batch_spec(wants, owners)
        spec["long"] = self._long_numbers(wants)
        spec["wanted"] = self._wanted(wants)
        outcome = await self._commit(batch, spec, ready)
        if outcome is None:
            return  # refused by the database: decided again without the culprit
        rz, decided = outcome
        figures = self._figures
        figures.batches += 1
        figures.commands += sum(len(steps) for _, steps in decided)
        figures.count(rz)
        effects = [e for _, steps in decided for step in steps for e in step.effects]
        figures.account(rz, effects, owners)
        for (conn, run), (trial, steps) in zip(batch, decided, strict=True):
            self._finish(conn, run, trial, steps)

    def _guess(self, batch: Batch) -> tuple[list[Wants], list[str]]:
        """What the batch reads (to lock and load), and the addresses whose quotas it
        checks; an `open`'s reader is registered before the decision (what commits from
        now on is held for it)."""
        wants: list[Wants] = []
        owners: list[str] = []
        for conn, run in batch:
            session = conn.session
            guessed = session.wants_run(run) if len(run) > 1 else [session.wants(run[0])]
            wants.extend(guessed)
            if any(w.owner for w in guessed):
                owners.append(conn.address)
            if session.mailbox is None:
                for want, msg in zip(guessed, run, strict=True):
                    if msg["type"] == "open" and want.mailboxes:
                        self._notes.subscriptions.pending(conn, want.mailboxes[0])
                        break
        return wants, owners

    def _wanted(self, wants: list[Wants]) -> dict[str, int]:
        """Per app allocated in, how many free numbers the batch may need: its `allocate`s
        there and the names this node's other running batches are making (they count as
        taken here); `channel.short_names` reads lengths until they hold that many."""
        wanted: Counter[str] = Counter(app_id for want in wants for app_id in want.allocates)
        for app_id, _ in self._reserved:
            if app_id in wanted:
                wanted[app_id] += 1
        return dict(wanted)

    def _long_numbers(self, wants: list[Wants]) -> list[list[str]]:
        """Numbers 1000-999999 drawn for each `allocate`, `long_draws` each (the database
        says which are free, for when 1-999 are all taken: store/postgres/shared.py)."""
        randbelow = self._random.randbelow
        draws = long_draws(self._figures.totals[0])
        return [
            [app_id, str(1000 + randbelow(LONG_NUMBERS))]
            for want in wants
            for app_id in want.allocates
            for _ in range(draws)
        ]

    async def _commit(
        self, batch: Batch, spec: dict[str, Any], ready: Collection[Member]
    ) -> Outcome | None:
        """The batch decided and committed: again after a collision, and after a failed
        database until it commits; None when the database refused its content."""
        host = self._host
        cover = Cover(spec)
        pause = RETRY_FIRST
        while True:
            now = host.clock()
            began = time.monotonic()
            made: set[tuple[str, str]] = set()
            try:
                outcome: Outcome = await self._store.decide(
                    spec,
                    partial(self._run, batch, now=now, made=made, cover=cover),
                    more=lambda: bool(ready),
                )
            except Conflict:
                self._reserved -= made
                self._figures.conflicts += 1
                continue
            except Refused as err:
                self._reserved -= made
                await self._refused(batch, ready, err)
                return None
            except StoreError as err:
                self._reserved -= made
                self._failing = True
                host.health.failed(err)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
                continue
            self._reserved -= made
            break
        if self._failing:
            self._failing = False
            host.health.recovered()
        host.metrics.observe_commit(time.monotonic() - began)
        return outcome

    async def _refused(self, batch: Batch, ready: Collection[Member], err: Refused) -> None:
        """The content, not the database: each command is decided alone, so only the one
        the database refuses is answered with an error."""
        if len(batch) == 1 and len(batch[0][1]) == 1:
            conn, (msg,) = batch[0]
            log.warning("the database refused a command: %s", err)
            if conn.session.mailbox is None:
                self._notes.subscriptions.drop(conn)
            conn.emit_run([(msg, refusal(msg, NOT_STORED))])
            return
        for conn, run in batch:
            for msg in run:
                await self.decide([(conn, [msg])], ready)

    def _run(
        self,
        batch: Batch,
        loaded: dict[str, Any],
        *,
        now: float,
        made: set[tuple[str, str]],
        cover: Cover,
    ) -> tuple[Outcome, str]:
        """Decide the batch on the loaded rows (inside the transaction): the writes.

        Each connection's run is decided in order on one fork; a later command whose
        reads the batch did not lock stops the run there (`_finish` queues the rest).
        Nameplates this node's other running batches are making count as taken here, so
        two of its batches never allocate the same name (the second would have to be
        decided again); `made` gets this batch's, until it ends.
        """
        rz = self._rendezvous(loaded, now, cover)
        decided: list[tuple[Session, list[Step]]] = []
        rows: list[list[Any]] = []
        messages: list[list[Any]] = []
        for conn, run in batch:
            trial = conn.session.fork(rz)
            steps: list[Step] = []
            for msg in run:
                if steps and (
                    steps[-1].close is not None or not cover.covers(trial.wants(msg), conn.address)
                ):
                    break
                steps.append(_run_command(conn, trial, msg, now, rz))
            decided.append((trial, steps))
            for step in steps:
                rows.extend(encode_effects(step.effects))
                for effect in step.effects:
                    if isinstance(effect, fx.PutNameplate):
                        made.add((effect.app_id, effect.name))
                for put in new_messages(step.effects):
                    messages.append(note(put, id(conn)))
        self._reserved |= made
        rows.extend(touches(rz, loaded, now))
        rows.extend(["notify", payload] for payload in payloads(self._id, messages))
        return (rz, decided), encode_rows(rows)

    def _rendezvous(self, loaded: dict[str, Any], now: float, cover: Cover) -> Rendezvous:
        """The loaded rows as a rendezvous, with the names other batches are making."""
        rz = self._figures.rendezvous(loaded, now, self._random, self._host.ledger.disk_low)
        for app_id, name in self._reserved:
            app = rz.apps.get(app_id)
            if app is not None and (app_id, name) not in cover.names and name not in app.nameplates:
                app.put_nameplate(Nameplate(name, ""))
        return rz

    def _finish(
        self, conn: Member, run: list[dict[str, Any]], trial: Session, steps: list[Step]
    ) -> None:
        """The batch committed: the fork becomes the session, the replies leave."""
        session = conn.session
        was_reading = session.mailbox is not None
        session.adopt(trial)
        mailbox = session.mailbox
        if mailbox is not None:
            # a small stand-in: the loaded rows are not kept past the batch
            session.mailbox = Mailbox(mailbox.id, mailbox.for_nameplate, 0.0)
        left = run[len(steps) :]
        if left:
            self._queues.put_back(conn, left)
        notes = self._notes
        for step in steps:
            notes.echoed(conn, new_messages(step.effects))
        conn.emit_run(list(zip(run, steps, strict=False)))
        if self._queues.gone(conn) or mailbox is None:
            notes.subscriptions.drop(conn)
        elif not was_reading and session.app_id is not None:
            # the `open` committed: its replay is queued; the rest of the mailbox follows
            notes.subscriptions.go_live(conn, max(step.replayed_up_to for step in steps))


def _run_command(
    conn: Member, trial: Session, msg: dict[str, Any], now: float, rz: Rendezvous
) -> Step:
    """One command on a connection's fork: live messages reach only its own echo (the
    other readers get theirs from the notification, after the commit)."""
    subscribed = None
    if trial.mailbox is not None and trial.app_id is not None:
        subscribed = rz.mailbox(trial.app_id, trial.mailbox.id)
        if subscribed is not None:
            subscribed.subscribers[conn] = None  # its own echo only
    was_reading = trial.mailbox is not None
    step = trial.receive(msg, now)
    if subscribed is not None:
        subscribed.subscribers.clear()
    if trial.mailbox is not None:
        trial.mailbox.subscribers.clear()
        if not was_reading and step.replayed:
            # the replay ends here; what later commands of the batch add goes live
            step.replayed_up_to = trial.mailbox.messages[len(step.replayed) - 1].seq
    return step
