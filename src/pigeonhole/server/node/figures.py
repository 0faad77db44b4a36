"""What a node counts and what it knows of the whole server, for quotas and the views.

The database's totals (nameplates, mailboxes, stored bytes) are read every tick
(server/node/leader.py) and moved by each of this node's batches in between (`account`), so
the server-wide stored-bytes cap and /metrics see them without a query per command. A
batch's exchanges go into the server's rendezvous counters (`count`): the status page
shows this node's share.
"""

from __future__ import annotations

from typing import Any

from pigeonhole.protocol import effects as fx
from pigeonhole.protocol.channels import MAX_APPS_COUNTED, OTHER_APPS, Randomness, Rendezvous
from pigeonhole.server.core import Core
from pigeonhole.server.deciding import Figure
from pigeonhole.store.postgres import PostgresStore
from pigeonhole.store.postgres.shared import loaded_rendezvous

#: a change to the (nameplates, mailboxes) totals, by effect type
_CHANGES: dict[type, tuple[int, int]] = {
    fx.PutNameplate: (1, 0),
    fx.DeleteNameplate: (-1, 0),
    fx.PutMailbox: (0, 1),
    fx.DeleteMailbox: (0, -1),
}


class Figures:
    def __init__(self, host: Core) -> None:
        self._host = host
        #: (nameplates, mailboxes, stored bytes) in the whole database
        self.totals = (0, 0, 0)
        self.leader = False
        #: nodes that reported within NODE_STALE seconds (this one included)
        self.nodes_alive = 1
        self.batches = 0
        self.commands = 0
        self.conflicts = 0

    def rendezvous(
        self, loaded: dict[str, Any], now: float, random: Randomness, disk_low: bool = False
    ) -> Rendezvous:
        """Rows one transaction loaded, as a rendezvous under this server's settings and
        the server-wide stored bytes (the quota the core checks)."""
        config = self._host.config
        return loaded_rendezvous(
            loaded,
            now,
            random,
            blur_time=config.blur_usage,
            limits=config.limits,
            stored_bytes=self.totals[2],
            disk_low=disk_low,
        )

    def read_totals(self, totals: tuple[int, int, int]) -> None:
        """The database's totals as just read (every node's batches included)."""
        self.totals = totals
        self._host.ledger.stored_bytes = totals[2]

    def account(self, rz: Rendezvous, effects: list[fx.Effect], owners: list[str]) -> None:
        """A batch's changes to the totals (other nodes' come with the next tick)."""
        nameplates, mailboxes, _ = self.totals
        for effect in effects:
            change = _CHANGES.get(type(effect))
            if change is not None:
                nameplates += change[0]
                mailboxes += change[1]
        held = rz.ledger
        self.read_totals((max(nameplates, 0), max(mailboxes, 0), max(held.stored_bytes, 0)))
        bytes_by = self._host.ledger.bytes_by
        for owner in owners:
            amount = held.bytes_by.get(owner, 0)
            if amount:
                bytes_by[owner] = amount
            else:
                bytes_by.pop(owner, None)

    def count(self, rz: Rendezvous) -> None:
        """A batch's exchanges, for the status page (this node's share)."""
        node = self._host.rendezvous
        node.mailboxes_created += rz.mailboxes_created
        node.results.update(rz.results)
        by_app = node.created_by_app
        for app_id, count in rz.created_by_app.items():
            key = app_id if app_id in by_app or len(by_app) < MAX_APPS_COUNTED else OTHER_APPS
            by_app[key] += count

    def status(self, node_id: str) -> dict[str, Any]:
        """Whether this node leads, how many nodes report, what it decided."""
        return {
            "id": node_id,
            "leader": self.leader,
            "nodes": self.nodes_alive,
            "batches": self.batches,
            "commands": self.commands,
            "collisions": self.conflicts,
        }

    def metrics(self, store: PostgresStore) -> list[Figure]:
        """Its batches, collisions, notifications and leadership, for /metrics."""
        return [
            ("pigeonhole_node_batches_total", "counter", self.batches),
            ("pigeonhole_node_commands_total", "counter", self.commands),
            ("pigeonhole_node_conflicts_total", "counter", self.conflicts),
            ("pigeonhole_node_notifications_total", "counter", store.notifications),
            ("pigeonhole_node_relistens_total", "counter", store.relistens),
            ("pigeonhole_node_leader", "gauge", int(self.leader)),
        ]
