"""Each connection's commands, queued in arrival order, and the lanes that take batches.

A connection has commands in one batch at a time, so its order holds. When a command of it
may be decided, the connection goes into a lane (an ordered set); a lane's batch takes
the next run of commands of each connection in it, up to RUN_MAX per connection and
MAX_BATCH in all. Commands on one nameplate or mailbox share a lane, so batches that run
at once (`--node-lanes`) rarely wait for each other's locks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from pigeonhole.server.deciding import Member
from pigeonhole.server.node.refusals import REFUSE

#: commands decided in one transaction at most
MAX_BATCH = 256
#: a connection's queued commands decided in one batch at most, in order
RUN_MAX = 8

#: connections with their runs of queued commands, in order
Batch = list[tuple[Member, list[dict[str, Any]]]]


class Queues:
    def __init__(self, lanes: int, max_queued: int) -> None:
        self._max_queued = max_queued
        self._queues: dict[Member, deque[dict[str, Any]]] = {}
        #: per lane, connections with a queued command and none in a running batch
        self.lanes: list[dict[Member, None]] = [{} for _ in range(lanes)]
        self._wakes = [asyncio.Event() for _ in range(lanes)]
        self._inflight: set[Member] = set()
        #: gone, but with commands still to decide
        self._gone: set[Member] = set()
        #: the connections with commands queued or being decided, by notification origin
        #: token (a message's sender is told apart by it: server/node/notifications.py)
        self.by_token: dict[int, Member] = {}

    def put(self, conn: Member, msg: dict[str, Any]) -> None:
        """Queue a command; a connection over its bound is refused and closed as a flood."""
        queue = self._queues.get(conn)
        if queue is None:
            queue = self._queues[conn] = deque()
            self.by_token[id(conn)] = conn
        elif len(queue) >= self._max_queued:
            self._queues.pop(conn, None)
            for lane in self.lanes:
                lane.pop(conn, None)
            conn.flooded(msg)
            return
        queue.append(msg)
        if conn not in self._inflight and len(queue) == 1:
            self._make_ready(conn)

    def forget(self, conn: Member) -> None:
        """The connection is gone: the commands it sent are still decided, in order."""
        if conn in self._queues or conn in self._inflight:
            self._gone.add(conn)
        else:
            self.by_token.pop(id(conn), None)

    def gone(self, conn: Member) -> bool:
        return conn in self._gone

    async def take(self, lane: int) -> Batch:
        """The lane's next batch (waiting for one): each ready connection's next run."""
        ready, wake = self.lanes[lane], self._wakes[lane]
        while not ready:
            wake.clear()
            await wake.wait()
        batch: Batch = []
        taken = 0
        while ready and taken < MAX_BATCH:
            conn = next(iter(ready))
            del ready[conn]
            run = self._run_of(conn, min(RUN_MAX, MAX_BATCH - taken))
            batch.append((conn, run))
            taken += len(run)
            self._inflight.add(conn)
        return batch

    def _run_of(self, conn: Member, room: int) -> list[dict[str, Any]]:
        """The connection's next commands, in order (a refusal is answered alone)."""
        queue = self._queues[conn]
        run = [queue.popleft()]
        if run[0]["type"] != REFUSE:
            while queue and len(run) < room and queue[0]["type"] != REFUSE:
                run.append(queue.popleft())
        if not queue:
            del self._queues[conn]
        return run

    def put_back(self, conn: Member, left: list[dict[str, Any]]) -> None:
        """Commands of a run not decided in its batch: first in the queue again, in order."""
        self._queues.setdefault(conn, deque()).extendleft(reversed(left))

    def done(self, batch: Batch) -> None:
        """The batch ended: its connections may bring their next commands."""
        for conn, _ in batch:
            self._inflight.discard(conn)
            if conn in self._queues:
                self._make_ready(conn)
            elif conn in self._gone:
                self._gone.discard(conn)
                self.by_token.pop(id(conn), None)

    def _make_ready(self, conn: Member) -> None:
        """The connection's next command may be decided: into its lane."""
        lane = self._lane_of(conn, self._queues[conn][0])
        self.lanes[lane][conn] = None
        self._wakes[lane].set()

    def _lane_of(self, conn: Member, msg: dict[str, Any]) -> int:
        """Commands on one nameplate or mailbox share a lane, so this node's batches that
        run at once rarely wait for each other's locks; the rest go round."""
        count = len(self.lanes)
        if count == 1 or msg["type"] == REFUSE:
            return 0
        want = conn.session.wants(msg)
        keys = want.mailboxes or want.names
        if keys:
            return hash(keys[0]) % count
        return id(conn) % count
