"""A node of a server whose state lives in PostgreSQL, shared with any number of nodes.

On SQLite one process holds the truth in memory and the store only makes it durable. Here
the database holds it, so a node keeps nothing a client depends on but its connections.
`Node` is the decider (server/deciding.py) for such a store, made of one part per job:

- queues.py: each connection's commands in arrival order, and the lanes that take them in
  batches (`--node-lanes` batches run at once, each on a writer connection of its own);
- batches.py: a batch decided in one transaction, replies only after its commit;
- refusals.py: commands refused before they are decided (U+0000);
- notifications.py and subscriptions.py: messages to every node's readers through NOTIFY;
- leader.py: every node's tick, and the leader's pruning and usage samples;
- figures.py: the database's totals and the node's counters, for quotas and the views.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from pigeonhole.protocol.channels import Randomness
from pigeonhole.server.core import Core
from pigeonhole.server.deciding import Figure, Member, UsageCounts
from pigeonhole.server.node.batches import Batches
from pigeonhole.server.node.figures import Figures
from pigeonhole.server.node.leader import Leadership
from pigeonhole.server.node.notifications import Notifications
from pigeonhole.server.node.queues import Queues
from pigeonhole.server.node.refusals import screened
from pigeonhole.store.postgres import PostgresStore

log = logging.getLogger("pigeonhole.node")


class Node:
    def __init__(self, host: Core, store: PostgresStore, randomness: Randomness) -> None:
        self.host = host
        self.store = store
        #: this node's id in `channel.nodes` and in its notifications (new at each start)
        self.id = secrets.token_hex(8)
        config = host.config
        self._queues = Queues(config.node_lanes, config.max_queued_frames)
        self._notes = Notifications(self.id, store, self._queues.by_token)
        self._figures = Figures(host)
        parts = (self._queues, self._notes, self._figures)
        self._batches = Batches(self.id, host, store, randomness, parts)
        subscriptions = self._notes.subscriptions
        self._leadership = Leadership(
            self.id, host, store, self._figures, subscriptions, randomness
        )
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def leader(self) -> bool:
        """Whether this node leads: it prunes and writes the usage samples."""
        return self._figures.leader

    @property
    def batches(self) -> int:
        """Batches this node decided and committed."""
        return self._figures.batches

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """LISTEN first, then serve (so nothing committed after this start is missed)."""
        await self.store.listen(self._notes.notified, self._notes.resync)
        await self.report()
        loop = asyncio.get_running_loop()
        self._tasks = [
            *(loop.create_task(self._run_lane(lane)) for lane in range(len(self._queues.lanes))),
            loop.create_task(self._notes.run()),
            loop.create_task(self._leadership.every_tick()),
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

    async def report(self) -> None:
        """Report now (as every tick does): totals, this node's counts, leadership."""
        await self._leadership.report()

    # -- commands -------------------------------------------------------------------

    def submit(self, conn: Member, msg: dict[str, Any], frame: str | bytes) -> None:
        """Queue a decoded command (`frame`: as received); it is decided in a later batch,
        in order."""
        self._queues.put(conn, screened(msg, frame))

    def forget(self, conn: Member) -> bool:
        """The connection is gone: it reads nothing more. Commands it sent before are still
        decided, in order (on SQLite each is decided as it arrives, so a `close` sent just
        before hanging up counts there too); their replies go nowhere."""
        self._notes.forget(conn)
        self._queues.forget(conn)
        return not self._queues.gone(conn)

    async def _run_lane(self, lane: int) -> None:
        """Decide one lane's ready commands, a batch at a time.

        Lanes run side by side, each on a writer connection of its own: one decides on
        the node while another waits for the database or its commit. A connection has
        one command in a batch at most, so its order holds; the locks (one global order)
        keep concurrent batches off each other's rows.
        """
        queues = self._queues
        ready = queues.lanes[lane]
        while True:
            batch = await queues.take(lane)
            try:
                await self._batches.decide(batch, ready)
            except Exception:
                log.exception("a batch of %d connections' commands failed", len(batch))
            finally:
                queues.done(batch)
                del batch  # not held while the lane waits: its connections may be gone

    # -- the server's questions ------------------------------------------------------

    def alive(self) -> tuple[int, int]:
        nameplates, mailboxes, _ = self._figures.totals
        return nameplates, mailboxes

    async def prune(self) -> int:
        return await self._leadership.prune()

    async def usage_counts(self, now: float) -> UsageCounts | None:
        return await self._leadership.usage_counts(now)

    def status(self) -> dict[str, Any]:
        return self._figures.status(self.id)

    def figures(self) -> list[Figure]:
        return self._figures.metrics(self.store)
