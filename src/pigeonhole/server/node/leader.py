"""Every node's tick, and the leader's work: pruning and the usage samples.

Each second a node reads the database's totals, reports its connection counts into
`channel.nodes`, and tries for the leader lock (a session advisory lock on a connection of
its own: store/postgres/store.py `lead`), so exactly one node leads and a node that dies lets go
with its connection. The leader prunes idle channels and writes the usage samples,
summing every live node's counts. Each node touches the mailboxes its readers hold open
once every quarter of the expiry (`touch_every`), a slice at each tick (server/turns.py), so a
mailbox read on any node is never pruned and a crowd of readers costs the database a
steady trickle rather than one burst; a new leader grants every channel one fresh expiry
window first (the previous leader's clients are reconnecting).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import Randomness
from pigeonhole.server.core import Core
from pigeonhole.server.deciding import UsageCounts
from pigeonhole.server.node.figures import Figures
from pigeonhole.server.node.subscriptions import Subscriptions
from pigeonhole.server.turns import Turn
from pigeonhole.store.postgres import PostgresStore, encode_batch
from pigeonhole.store.postgres.shared import batch_spec

log = logging.getLogger("pigeonhole.node")

#: seconds between a node's reports (totals, its connection counts, leadership)
TICK = 1.0
#: a node that has not reported for this long is not counted in the usage samples
NODE_STALE = 5.0
#: addresses holding the most stored bytes, read every TOP_EVERY seconds for the status
#: page (between reads, each batch updates the addresses it served)
TOP_HOLDERS = 5
TOP_EVERY = 10.0
#: idle mailboxes pruned per transaction
PRUNE_CHUNK = 500


def touch_every(expiry: float) -> float:
    """Seconds between the turns in which a node touches each of its readers' mailboxes:
    a quarter of the expiry (read at each tick: the expiry is reloadable), so a held
    mailbox is never older than two of these (touched first in one turn, last in the
    next) when the leader looks, and 15,000 held mailboxes cost 91 rows a second at the
    default expiry, not a statement every few seconds."""
    return expiry / 4


class Leadership:
    def __init__(
        self,
        node_id: str,
        host: Core,
        store: PostgresStore,
        figures: Figures,
        subscriptions: Subscriptions,
        randomness: Randomness,
    ) -> None:
        self._id = node_id
        self._host = host
        self._store = store
        self._figures = figures
        self._subscriptions = subscriptions
        self._random = randomness
        self._turn: Turn[tuple[str, str]] = Turn()
        self._last_top = 0.0

    async def every_tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            try:
                await self.report()
            except Exception as err:
                log.warning("node report failed: %s", err)

    async def report(self) -> None:
        """Totals for quotas and views; this node's counts; readers' mailboxes; leadership."""
        host, store, figures = self._host, self._store, self._figures
        now = host.clock()
        figures.read_totals(await store.totals())
        await store.report_node(self._id, host.uptime.started, now, self._own_counts())
        figures.nodes_alive = (await store.node_sums(now - NODE_STALE))[0]
        if now - self._last_top >= TOP_EVERY:  # a GROUP BY over every address's holdings
            self._last_top = now
            top = await store.top_holders(TOP_HOLDERS)
            host.ledger.bytes_by.clear()
            host.ledger.bytes_by.update(top)
        every = touch_every(host.config.prune_expiry)
        subs = self._subscriptions
        touching = self._turn.slice(subs.keys, subs.holds, now, every)
        if touching:
            await store.touch(touching, now, every)
        was_leader = figures.leader
        figures.leader = await store.lead()
        if figures.leader and not was_leader:
            log.info("this node leads: it prunes and samples usage")
            await store.grant_grace(now)

    def _own_counts(self) -> tuple[int, int, int]:
        conns = self._host.clients  # its bound count is kept as sessions change
        return len(conns), conns.bound, len(self._subscriptions)

    async def prune(self) -> int:
        """The leader deletes channels idle past the expiry (no reader on any node touched
        them); other nodes prune nothing."""
        if not self._figures.leader:
            return 0
        await self._store.fold_holdings()  # the per-address counters' shards, summed
        host, subscriptions = self._host, self._subscriptions
        pruned = 0
        while True:
            now = host.clock()
            idle = await self._store.idle_mailboxes(now - host.config.prune_expiry, PRUNE_CHUNK)
            if not idle:
                return pruned
            # this node's readers' are kept, touched now (as after a reload that shortened
            # the expiry); other nodes' readers' are touched by their nodes' turns
            kept: list[tuple[str, str]] = []
            doomed: list[tuple[str, str]] = []
            for key in idle:
                (kept if subscriptions.holds(key) else doomed).append(key)
            if kept:
                await self._store.touch(kept, now, 0.0)
            done = await self._prune_chunk(doomed, now) if doomed else 0
            pruned += done
            if (done == 0 and not kept) or len(idle) < PRUNE_CHUNK:
                return pruned

    async def _prune_chunk(self, idle: list[tuple[str, str]], now: float) -> int:
        """Prune these mailboxes, decided on their rows in one transaction."""
        host, figures = self._host, self._figures
        config = host.config
        spec = batch_spec([], ())
        spec["mailboxes"] = sorted(idle)

        def decide(loaded: dict[str, Any]) -> tuple[int, str]:
            rz = figures.rendezvous(loaded, now, self._random)
            effects: list[fx.Effect] = []
            count = rz.prune(now, config.prune_expiry, effects)
            figures.count(rz)
            figures.account(rz, effects, [])
            return count, encode_batch(effects)

        return await self._store.decide(spec, decide)

    async def usage_counts(self, now: float) -> UsageCounts | None:
        """(connections, bound, subscribed, nameplates, mailboxes) of the whole server:
        every live node's connections summed (this one's as of now), for the leader's usage
        sample; None on the other nodes."""
        if not self._figures.leader:
            return None
        store = self._store
        await store.report_node(self._id, self._host.uptime.started, now, self._own_counts())
        _, connections, bound, subscribed = await store.node_sums(now - NODE_STALE)
        nameplates, mailboxes, _ = await store.totals()
        return connections, bound, subscribed, nameplates, mailboxes
