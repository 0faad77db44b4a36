"""A node of a server whose state lives in PostgreSQL, shared with any number of nodes.

On SQLite one process holds the truth in memory and the store only makes it durable. Here
the database holds it, so a node keeps nothing a client depends on but its connections:

- **Commands, in batches.** Each connection's commands queue in arrival order; the node
  takes the next command of every connection that has one and decides them together in
  one transaction (store/postgres.py `decide`): lock and load what they read, run each on
  a `Session.fork` against a `Rendezvous` of those rows (store/shared.py), the same
  protocol core as on SQLite, write the effects, NOTIFY, commit. Only then do replies
  leave and the forks become the sessions' state. A batch that collides with another
  node's (two nodes made the same nameplate; a deadlock) is rolled back and decided
  again from fresh rows: the forks are dropped, so nothing was decided twice. A database
  that fails keeps the commands queued (retried with a doubling pause) and answers
  nothing: no reply without its commit. One batch runs at a time per node. A connection
  brings its queued commands in order, up to RUN_MAX: a client that sends `open` and
  `add`, or `bind` and `allocate`, without waiting gets both decided in one transaction
  (each later one only if what it reads was locked for the batch; the rest wait for the
  next).
- **Messages to other nodes** ride the batch's NOTIFY (one notification per batch, more
  only past PostgreSQL's 8000-byte payload limit; a body too big to carry is read from
  the table by the receiving node). Every node, this one included, hands them to its
  readers (server/node/subscriptions.py), except the sender's own connection, which got its
  echo straight after the commit.
- **The leader** (a session advisory lock: store/postgres.py `lead`) prunes idle channels
  and writes the usage samples, summing every node's connection counts from
  `channel.nodes`. Each node touches the mailboxes its readers hold open, so a mailbox
  with a reader on any node is never pruned; a new leader grants every channel one
  fresh expiry window first (the previous leader's clients are reconnecting).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Collection
from functools import partial
from typing import Any, Protocol

import orjson

from pigeonhole.config import ServerConfig
from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import (
    MAX_APPS_COUNTED,
    OTHER_APPS,
    Mailbox,
    Nameplate,
    Randomness,
    Rendezvous,
)
from pigeonhole.protocol.ledger import Ledger
from pigeonhole.protocol.session import Session, Step, Wants, error_frame
from pigeonhole.server.node.subscriptions import Subscriptions
from pigeonhole.store.group_commit import RETRY_FIRST, RETRY_MAX
from pigeonhole.store.postgres import (
    Conflict,
    PostgresStore,
    Refused,
    encode_batch,
    encode_effects,
    encode_rows,
)
from pigeonhole.store.shared import (
    Cover,
    batch_spec,
    loaded_rendezvous,
    new_messages,
    touches,
)
from pigeonhole.store.sqlite import StoreError

log = logging.getLogger("pigeonhole.node")

#: commands decided in one transaction at most, and lanes of batches a node runs at once
#: (one measured best on this 2-core machine, where the node, PostgreSQL and the load
#: share the cores: more lanes made smaller batches and more transactions; a database
#: across a network, where a batch mostly waits, is where more lanes pay)
MAX_BATCH = 256
#: a connection's queued commands decided in one batch at most, in order
RUN_MAX = 8
BATCHES_IN_FLIGHT = int(os.environ.get("PIGEONHOLE_NODE_LANES", "1"))
#: NOTIFY payloads stay under PostgreSQL's 8000-byte limit; a message frame bigger than
#: FRAME_INLINE is sent as its number only, and read from the table by whoever needs it
PAYLOAD_LIMIT = 7900
FRAME_INLINE = 6000
#: seconds between a node's reports (totals, its connection counts, leadership), and
#: between touches of the mailboxes its readers hold
TICK = 1.0
TOUCH_EVERY = 30.0
#: a node that has not reported for this long is not counted in the usage samples
NODE_STALE = 5.0
#: addresses holding the most stored bytes, read every TOP_EVERY seconds for the status
#: page (between reads, each batch updates the addresses it served)
TOP_HOLDERS = 5
TOP_EVERY = 10.0
#: idle mailboxes pruned per transaction
PRUNE_CHUNK = 500


class Member(Protocol):
    """A connection as the node sees it (server/connection.py)."""

    @property
    def session(self) -> Session: ...
    @property
    def address(self) -> str: ...

    def emit_run(self, decided: list[tuple[dict[str, Any], Step]]) -> None: ...
    def deliver(self, frame: dict[str, Any]) -> None: ...
    def flooded(self, msg: dict[str, Any]) -> None: ...


#: connections with their runs of queued commands, in order
Batch = list[tuple[Member, list[dict[str, Any]]]]


class NodeHost(Protocol):
    @property
    def config(self) -> ServerConfig: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def rendezvous(self) -> Rendezvous: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def connections(self) -> Collection[Any]: ...
    @property
    def started_at(self) -> float: ...

    def storage_failed(self, err: BaseException) -> None: ...
    def storage_recovered(self) -> None: ...
    def observe_commit(self, seconds: float) -> None: ...


class Node:
    def __init__(self, host: NodeHost, store: PostgresStore, randomness: Randomness) -> None:
        self.host = host
        self.store = store
        self._random = randomness
        #: this node's id in `channel.nodes` and in its notifications (new at each start)
        self.id = secrets.token_hex(8)
        self._queues: dict[Member, deque[dict[str, Any]]] = {}
        #: per lane, connections with a queued command and none in a running batch
        #: (ordered sets; server/node/node.py `_lane_of`)
        self._lanes: list[dict[Member, None]] = [{} for _ in range(BATCHES_IN_FLIGHT)]
        self._wakes = [asyncio.Event() for _ in range(BATCHES_IN_FLIGHT)]
        self._inflight: set[Member] = set()
        self._gone: set[Member] = set()
        self.subscriptions = Subscriptions(lambda conn, frame: conn.deliver(frame))
        #: notification origin tokens of this node's connections, and the numbers of the
        #: messages each sent whose notification has not come back yet (a re-read after a
        #: lost listener must not echo them twice)
        self._by_token: dict[int, Member] = {}
        self._echoed: dict[Member, set[int]] = {}
        self._notes: asyncio.Queue[str] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._failing = False
        #: (nameplates, mailboxes, stored bytes) in the whole database, refreshed each tick
        self.totals = (0, 0, 0)
        self.leader = False
        #: nodes that reported within NODE_STALE seconds (this one included)
        self.nodes_alive = 1
        self._last_touch = 0.0
        self._last_top = 0.0
        #: nameplates this node's running batches are making (see `_run`)
        self._reserved: set[tuple[str, str]] = set()
        #: counters for operators
        self.batches = 0
        self.commands = 0
        self.conflicts = 0

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """LISTEN first, then serve (so nothing committed after this start is missed)."""
        await self.store.listen(self._notified, self._resync)
        await self._report()
        loop = asyncio.get_running_loop()
        self._tasks = [
            *(loop.create_task(self._run_batches(lane)) for lane in range(len(self._lanes))),
            loop.create_task(self._run_notes()),
            loop.create_task(self._every_tick()),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):
            await self.store.forget_node(self.id)

    # -- commands -------------------------------------------------------------------

    def submit(self, conn: Member, msg: dict[str, Any], frame: str | bytes) -> None:
        """Queue a decoded command (`frame`: as received); it is decided in a later batch,
        in order."""
        # JSON can only spell U+0000 as an escape: most frames are not walked at all
        escaped = "\\u0000" in frame if isinstance(frame, str) else b"\\u0000" in frame
        if escaped and _has_nul(msg):
            # PostgreSQL text cannot hold U+0000: refused here, not by a failed batch
            msg = {"type": _REFUSE, "orig": msg, "error": NUL_REFUSED}
        queue = self._queues.get(conn)
        if queue is None:
            queue = self._queues[conn] = deque()
            self._by_token[id(conn)] = conn
        elif len(queue) >= self.host.config.max_queued_frames:
            self._queues.pop(conn, None)
            for lane in self._lanes:
                lane.pop(conn, None)
            conn.flooded(msg)
            return
        queue.append(msg)
        if conn not in self._inflight and len(queue) == 1:
            self._make_ready(conn)

    def forget(self, conn: Member) -> None:
        """The connection is gone: it reads nothing more. Commands it sent before are still
        decided, in order (on SQLite each is decided as it arrives, so a `close` sent just
        before hanging up counts there too); their replies go nowhere."""
        self.subscriptions.drop(conn)
        self._echoed.pop(conn, None)
        if conn in self._queues or conn in self._inflight:
            self._gone.add(conn)
        else:
            self._by_token.pop(id(conn), None)

    def _make_ready(self, conn: Member) -> None:
        """The connection's next command may be decided: into its lane."""
        lane = self._lanes[self._lane_of(conn, self._queues[conn][0])]
        lane[conn] = None
        self._wakes[self._lanes.index(lane)].set()

    def _lane_of(self, conn: Member, msg: dict[str, Any]) -> int:
        """Commands on one nameplate or mailbox share a lane, so this node's batches that
        run at once rarely wait for each other's locks; the rest go round."""
        if len(self._lanes) == 1 or msg["type"] == _REFUSE:
            return 0
        want = conn.session.wants(msg)
        keys = want.mailboxes or want.names
        if keys:
            return hash(keys[0]) % len(self._lanes)
        return id(conn) % len(self._lanes)

    async def _run_batches(self, lane: int) -> None:
        """Decide one lane's ready commands, a batch at a time.

        Lanes run side by side, each on a writer connection of its own: one decides on
        the node while another waits for the database or its commit. A connection has
        one command in a batch at most, so its order holds; the locks (one global order)
        keep concurrent batches off each other's rows.
        """
        ready, wake = self._lanes[lane], self._wakes[lane]
        while True:
            if not ready:
                wake.clear()
                await wake.wait()
                continue
            batch: Batch = []
            taken = 0
            while ready and taken < MAX_BATCH:
                conn = next(iter(ready))
                del ready[conn]
                queue = self._queues[conn]
                run = [queue.popleft()]
                # a refusal is answered alone, before its batch: it runs alone too
                room = min(RUN_MAX, MAX_BATCH - taken)
                if run[0]["type"] != _REFUSE:
                    while queue and len(run) < room and queue[0]["type"] != _REFUSE:
                        run.append(queue.popleft())
                if not queue:
                    del self._queues[conn]
                batch.append((conn, run))
                taken += len(run)
                self._inflight.add(conn)
            await self._run_one(batch, ready)

    async def _run_one(self, batch: Batch, ready: Collection[Member]) -> None:
        try:
            await self._decide(batch, ready)
        except Exception:
            log.exception("a batch of %d connections' commands failed", len(batch))
        finally:
            for conn, _ in batch:
                self._inflight.discard(conn)
                if conn in self._queues:
                    self._make_ready(conn)
                elif conn in self._gone:
                    self._gone.discard(conn)
                    self._by_token.pop(id(conn), None)

    async def _decide(self, batch: Batch, ready: Collection[Member] = ()) -> None:
        """Decide and commit a batch, then send its replies (`ready`: the connections
        waiting for the next batch)."""
        host = self.host
        refused = [(c, run[0]) for c, run in batch if run[0]["type"] == _REFUSE]
        if refused:
            for conn, note in refused:
                conn.emit_run([(note["orig"], _refusal(note["orig"], note["error"]))])
            batch = [(c, run) for c, run in batch if run[0]["type"] != _REFUSE]
            if not batch:
                return
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
                        # before the decision: what commits from now on is held for it
                        self.subscriptions.pending(conn, want.mailboxes[0])
                        break
        spec = batch_spec(wants, owners)
        cover = Cover(spec)
        pause = RETRY_FIRST
        while True:
            now = host.clock()
            began = time.monotonic()
            made: set[tuple[str, str]] = set()
            try:
                rz, outcome = await self.store.decide(
                    spec,
                    partial(self._run, batch, now=now, made=made, cover=cover),
                    more=lambda: bool(ready),
                )
                self._reserved -= made
                break
            except Conflict:
                self._reserved -= made
                self.conflicts += 1
            except Refused as err:
                self._reserved -= made
                # the content, not the database: decide each command alone, so only the
                # one the database refuses is answered with an error
                if len(batch) == 1 and len(batch[0][1]) == 1:
                    conn, (msg,) = batch[0]
                    log.warning("the database refused a command: %s", err)
                    if conn.session.mailbox is None:
                        self.subscriptions.drop(conn)
                    refusal = _refusal(msg, "server could not store this command")
                    conn.emit_run([(msg, refusal)])
                    return
                for conn, run in batch:
                    for msg in run:
                        await self._decide([(conn, [msg])], ready)
                return
            except StoreError as err:
                self._reserved -= made
                self._failing = True
                host.storage_failed(err)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
        if self._failing:
            self._failing = False
            host.storage_recovered()
        host.observe_commit(time.monotonic() - began)
        self.batches += 1
        self.commands += sum(len(steps) for _, steps in outcome)
        self._count(rz)
        effects = [e for _, steps in outcome for step in steps for e in step.effects]
        self._account(rz, effects, owners)
        for (conn, run), (trial, steps) in zip(batch, outcome, strict=True):
            self._finish(conn, run, trial, steps)

    def _run(
        self,
        batch: Batch,
        loaded: dict[str, Any],
        *,
        now: float,
        made: set[tuple[str, str]],
        cover: Cover,
    ) -> tuple[tuple[Rendezvous, list[tuple[Session, list[Step]]]], str]:
        """Decide the batch on the loaded rows (inside the transaction): the writes.

        Each connection's run is decided in order on one fork; a later command whose
        reads the batch did not lock stops the run there (`_finish` queues the rest).
        Nameplates this node's other running batches are making count as taken here, so
        two of its batches never allocate the same name (the second would have to be
        decided again); `made` gets this batch's, until it ends.
        """
        host = self.host
        config = host.config
        rz = loaded_rendezvous(
            loaded,
            now,
            self._random,
            blur_time=config.blur_usage,
            limits=config.limits,
            stored_bytes=self.totals[2],
            disk_low=host.ledger.disk_low,
        )
        for app_id, name in self._reserved:
            app = rz.apps.get(app_id)
            if app is not None and (app_id, name) not in cover.names:
                app.nameplates.setdefault(name, Nameplate(name, ""))
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
                steps.append(self._run_command(conn, trial, msg, now, rz))
            decided.append((trial, steps))
            for step in steps:
                rows.extend(encode_effects(step.effects))
                for effect in step.effects:
                    if isinstance(effect, fx.PutNameplate):
                        made.add((effect.app_id, effect.name))
                for put in new_messages(step.effects):
                    messages.append(_note(put, id(conn)))
        self._reserved |= made
        rows.extend(touches(rz, loaded, now))
        rows.extend(["notify", payload] for payload in _payloads(self.id, messages))
        return (rz, decided), encode_rows(rows)

    @staticmethod
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

    def _finish(
        self, conn: Member, run: list[dict[str, Any]], trial: Session, steps: list[Step]
    ) -> None:
        session = conn.session
        was_reading = session.mailbox is not None
        session.adopt(trial)
        mailbox = session.mailbox
        if mailbox is not None:
            # a small stand-in: the loaded rows are not kept past the batch
            session.mailbox = Mailbox(mailbox.id, mailbox.for_nameplate, 0.0)
        left = run[len(steps) :]
        if left:
            # not decided in this batch: first in its queue again, in order
            self._queues.setdefault(conn, deque()).extendleft(reversed(left))
        for step in steps:
            echoes = [put.seq for put in new_messages(step.effects)]
            if echoes:
                self._echoed.setdefault(conn, set()).update(echoes)
        conn.emit_run(list(zip(run, steps, strict=False)))
        if conn in self._gone or mailbox is None:
            self.subscriptions.drop(conn)
        elif not was_reading and session.app_id is not None:
            # the `open` committed: its replay is queued; the rest of the mailbox follows
            self.subscriptions.go_live(conn, max(step.replayed_up_to for step in steps))

    def _account(self, rz: Rendezvous, effects: list[fx.Effect], owners: list[str]) -> None:
        """This batch's changes to the totals (other nodes' come with the next tick)."""
        nameplates, mailboxes, _ = self.totals
        for effect in effects:
            kind = type(effect)
            if kind is fx.PutNameplate:
                nameplates += 1
            elif kind is fx.DeleteNameplate:
                nameplates -= 1
            elif kind is fx.PutMailbox:
                mailboxes += 1
            elif kind is fx.DeleteMailbox:
                mailboxes -= 1
        held = rz.ledger
        self.totals = (max(nameplates, 0), max(mailboxes, 0), max(held.stored_bytes, 0))
        ledger = self.host.ledger
        ledger.stored_bytes = self.totals[2]
        for owner in owners:
            amount = held.bytes_by.get(owner, 0)
            if amount:
                ledger.bytes_by[owner] = amount
            else:
                ledger.bytes_by.pop(owner, None)

    def _count(self, rz: Rendezvous) -> None:
        """The batch's exchanges, for the status page (this node's share)."""
        node = self.host.rendezvous
        node.mailboxes_created += rz.mailboxes_created
        node.results.update(rz.results)
        by_app = node.created_by_app
        for app_id, count in rz.created_by_app.items():
            key = app_id if app_id in by_app or len(by_app) < MAX_APPS_COUNTED else OTHER_APPS
            by_app[key] += count

    # -- messages from every node -------------------------------------------------------

    def _notified(self, payload: str) -> None:
        self._notes.put_nowait(payload)

    async def _run_notes(self) -> None:
        """Notifications in commit order (one at a time: a big body is read first)."""
        while True:
            payload = await self._notes.get()
            try:
                note = orjson.loads(payload)
                mine = note["n"] == self.id
                for app_id, mailbox_id, seq, token, frame in note["m"]:
                    origin = self._by_token.get(token) if mine else None
                    if origin is not None:
                        echoed = self._echoed.get(origin)
                        if echoed is not None:
                            echoed.discard(seq)
                    if frame is None:
                        found = await self.store.message(seq)
                        if found is None:
                            continue  # deleted meanwhile: nobody reads it any more
                        app_id, mailbox_id, frame = found
                    self.subscriptions.message((app_id, mailbox_id), seq, origin, frame)
            except Exception:
                log.exception("a notification could not be delivered")

    async def _resync(self) -> None:
        """The listener was lost and is back: re-read what readers may have missed."""
        log.warning("listening connection restored: re-reading the open mailboxes")
        for sub in self.subscriptions.live():
            app_id, mailbox_id = sub.key
            echoed = self._echoed.get(sub.conn, set())
            for seq, frame in await self.store.messages_after(app_id, mailbox_id, sub.last_seq):
                origin = sub.conn if seq in echoed else None
                self.subscriptions.message(sub.key, seq, origin, frame)

    # -- every tick ---------------------------------------------------------------------

    async def _every_tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            try:
                await self._report()
            except Exception as err:
                log.warning("node report failed: %s", err)

    async def _report(self) -> None:
        """Totals for quotas and views; this node's counts; readers' mailboxes; leadership."""
        host = self.host
        now = host.clock()
        self.totals = await self.store.totals()
        host.ledger.stored_bytes = self.totals[2]
        await self.store.report_node(self.id, host.started_at, now, self._own_counts())
        self.nodes_alive = (await self.store.node_sums(now - NODE_STALE))[0]
        if now - self._last_top >= TOP_EVERY:  # a GROUP BY over every stored message
            self._last_top = now
            top = await self.store.top_holders(TOP_HOLDERS)
            host.ledger.bytes_by.clear()
            host.ledger.bytes_by.update(top)
        if now - self._last_touch >= TOUCH_EVERY:
            self._last_touch = now
            await self.store.touch(self.subscriptions.keys(), now)
        was_leader = self.leader
        self.leader = await self.store.lead()
        if self.leader and not was_leader:
            log.info("this node leads: it prunes and samples usage")
            await self.store.grant_grace(now)

    def _own_counts(self) -> tuple[int, int, int]:
        conns = self.host.connections
        return len(conns), sum(1 for c in conns if c.session.bound), len(self.subscriptions)

    def alive(self) -> tuple[int, int]:
        return self.totals[0], self.totals[1]

    def status(self) -> dict[str, Any]:
        """Whether this node leads, how many nodes report, what it decided."""
        return {
            "id": self.id,
            "leader": self.leader,
            "nodes": self.nodes_alive,
            "batches": self.batches,
            "commands": self.commands,
            "collisions": self.conflicts,
        }

    def figures(self) -> list[tuple[str, str, int]]:
        """Its batches, collisions, notifications and leadership, for /metrics."""
        return [
            ("pigeonhole_node_batches_total", "counter", self.batches),
            ("pigeonhole_node_commands_total", "counter", self.commands),
            ("pigeonhole_node_conflicts_total", "counter", self.conflicts),
            ("pigeonhole_node_notifications_total", "counter", self.store.notifications),
            ("pigeonhole_node_relistens_total", "counter", self.store.relistens),
            ("pigeonhole_node_leader", "gauge", int(self.leader)),
        ]

    # -- the leader's work ------------------------------------------------------------------

    async def prune(self) -> int:
        """The leader deletes channels idle past the expiry (no reader on any node touched
        them); other nodes prune nothing."""
        if not self.leader:
            return 0
        host = self.host
        expiry = host.config.prune_expiry
        pruned = 0
        # this node's readers first (others touch theirs every TOUCH_EVERY seconds, well
        # inside any expiry)
        await self.store.touch(self.subscriptions.keys(), host.clock())
        while True:
            now = host.clock()
            idle = await self.store.idle_mailboxes(now - expiry, PRUNE_CHUNK)
            if not idle:
                return pruned
            spec = batch_spec([], ())
            spec["mailboxes"] = sorted(idle)

            def decide(loaded: dict[str, Any], now: float = now) -> tuple[int, str]:
                rz = loaded_rendezvous(
                    loaded,
                    now,
                    self._random,
                    blur_time=host.config.blur_usage,
                    limits=host.config.limits,
                    stored_bytes=self.totals[2],
                )
                effects: list[fx.Effect] = []
                count = rz.prune(now, expiry, effects)
                self._count(rz)
                self._account(rz, effects, [])
                return count, encode_batch(effects)

            done = await self.store.decide(spec, decide)
            pruned += done
            if done == 0 or len(idle) < PRUNE_CHUNK:
                return pruned

    async def usage_counts(self, now: float) -> tuple[int, int, int, int, int] | None:
        """(connections, bound, subscribed, nameplates, mailboxes) of the whole server:
        every live node's connections summed (this one's as of now), for the leader's usage
        sample; None on the other nodes."""
        if not self.leader:
            return None
        await self.store.report_node(self.id, self.host.started_at, now, self._own_counts())
        _, connections, bound, subscribed = await self.store.node_sums(now - NODE_STALE)
        nameplates, mailboxes, _ = await self.store.totals()
        return connections, bound, subscribed, nameplates, mailboxes


#: a queued command already refused (never decided), and why
_REFUSE = " refused"
NUL_REFUSED = "strings may not contain U+0000 on this server"


def _refusal(msg: dict[str, Any], explain: str) -> Step:
    step = Step()
    step.immediate.append({"type": "ack", "id": msg.get("id")})
    step.immediate.append(error_frame(explain, msg))
    return step


def _has_nul(value: object, depth: int = 0) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if depth > 8:
        return False
    if isinstance(value, dict):
        return any(_has_nul(k, depth + 1) or _has_nul(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v, depth + 1) for v in value)
    return False


def _note(put: fx.PutMessage, token: int) -> list[Any]:
    """One message in a notification: [app, mailbox, number, origin, frame]; a message
    too big to carry goes as its number only (the receivers read it from the table)."""
    frame = {
        "type": "message",
        "side": put.side,
        "phase": put.phase,
        "body": put.body,
        "server_rx": put.server_rx,
        "id": put.msg_id,
    }
    item: list[Any] = [put.app_id, put.mailbox_id, put.seq, token, frame]
    if len(put.body) > FRAME_INLINE or len(orjson.dumps(item)) > FRAME_INLINE:
        item = [None, None, put.seq, token, None]
    return item


def _payloads(node: str, messages: list[list[Any]]) -> list[str]:
    """The batch's messages as few NOTIFY payloads as fit PAYLOAD_LIMIT, in order."""
    payloads: list[str] = []
    run: list[list[Any]] = []
    size = 0
    for item in messages:
        encoded = len(orjson.dumps(item)) + 1
        if run and size + encoded > PAYLOAD_LIMIT:
            payloads.append(orjson.dumps({"n": node, "m": run}).decode())
            run, size = [], 0
        run.append(item)
        size += encoded
    if run:
        payloads.append(orjson.dumps({"n": node, "m": run}).decode())
    return payloads
