"""Messages between nodes: a batch's messages ride its NOTIFY, every node hands them on.

A batch's messages go in as few NOTIFY payloads as fit PostgreSQL's 8000-byte limit (a
message too big to carry goes as its number; the receiving node reads it from the table).
PostgreSQL delivers notifications after the commit and in commit order. Every node, the
sender's included, hands each message to its connections that read that mailbox
(server/node/subscriptions.py), except the sender's own connection, which got its echo
straight after its commit: a message carries its node and an origin token, the sending
connection's. A listener that was lost and is back re-reads what readers may have missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import orjson

from pigeonhole.protocol import effects as fx
from pigeonhole.server.deciding import Member
from pigeonhole.server.node.subscriptions import Subscriptions
from pigeonhole.store.postgres import PostgresStore

log = logging.getLogger("pigeonhole.node")

#: NOTIFY payloads stay under PostgreSQL's 8000-byte limit; a message frame bigger than
#: FRAME_INLINE is sent as its number only, and read from the table by whoever needs it
PAYLOAD_LIMIT = 7900
FRAME_INLINE = 6000


class Notifications:
    def __init__(self, node_id: str, store: PostgresStore, by_token: Mapping[int, Member]):
        self._node_id = node_id
        self._store = store
        #: this node's connections by origin token (server/node/queues.py keeps it)
        self._by_token = by_token
        self.subscriptions = Subscriptions(_deliver)
        #: the numbers of the messages each connection sent whose notification has not come
        #: back yet (a re-read after a lost listener must not echo them twice)
        self._echoed: dict[Member, set[int]] = {}
        self._payloads: asyncio.Queue[str] = asyncio.Queue()

    def forget(self, conn: Member) -> None:
        self.subscriptions.drop(conn)
        self._echoed.pop(conn, None)

    def echoed(self, conn: Member, puts: list[fx.PutMessage]) -> None:
        """The connection got the echoes of these messages (its batch committed)."""
        if puts:
            self._echoed.setdefault(conn, set()).update(put.seq for put in puts)

    def notified(self, payload: str) -> None:
        """A notification arrived (the store's listener): handled in order by `run`."""
        self._payloads.put_nowait(payload)

    async def run(self) -> None:
        """Notifications in commit order (one at a time: a big body is read first)."""
        while True:
            payload = await self._payloads.get()
            try:
                await self._hand_on(orjson.loads(payload))
            except Exception:
                log.exception("a notification could not be delivered")

    async def _hand_on(self, note: dict[str, Any]) -> None:
        mine = note["n"] == self._node_id
        for app_id, mailbox_id, seq, token, frame in note["m"]:
            origin = self._by_token.get(token) if mine else None
            if origin is not None:
                echoed = self._echoed.get(origin)
                if echoed is not None:
                    echoed.discard(seq)
            if frame is None:
                found = await self._store.message(seq)
                if found is None:
                    continue  # deleted meanwhile: nobody reads it any more
                app_id, mailbox_id, frame = found
            self.subscriptions.message((app_id, mailbox_id), seq, origin, frame)

    async def resync(self) -> None:
        """The listener was lost and is back: re-read what readers may have missed."""
        log.warning("listening connection restored: re-reading the open mailboxes")
        for sub in self.subscriptions.live():
            app_id, mailbox_id = sub.key
            echoed = self._echoed.get(sub.conn, set())
            for seq, frame in await self._store.messages_after(app_id, mailbox_id, sub.last_seq):
                origin = sub.conn if seq in echoed else None
                self.subscriptions.message(sub.key, seq, origin, frame)


def _deliver(conn: Member, frame: dict[str, Any]) -> None:
    conn.deliver(frame)


def note(put: fx.PutMessage, token: int) -> list[Any]:
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


def payloads(node: str, messages: list[list[Any]]) -> list[str]:
    """The batch's messages as few NOTIFY payloads as fit PAYLOAD_LIMIT, in order."""
    found: list[str] = []
    run: list[list[Any]] = []
    size = 0
    for item in messages:
        encoded = len(orjson.dumps(item)) + 1
        if run and size + encoded > PAYLOAD_LIMIT:
            found.append(orjson.dumps({"n": node, "m": run}).decode())
            run, size = [], 0
        run.append(item)
        size += encoded
    if run:
        found.append(orjson.dumps({"n": node, "m": run}).decode())
    return found
