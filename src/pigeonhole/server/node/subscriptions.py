"""Which of this node's connections read which mailbox, when nodes share a database.

Messages reach other nodes' readers through PostgreSQL's NOTIFY, in commit order
(server/node/). A reader must get each message once, in mailbox order, across the
replay of its `open` and the live messages after it. So a subscription starts *pending*
before the `open` is decided: notifications that arrive meanwhile (another node may
commit an `add` right after the `open`, and its notification can reach this node before
the `open`'s own commit acknowledgement does) are held. When the `open` has committed,
its replay went out up to some message number; the held messages above it follow, and
from then on each live one above the last delivered. The sender's own connection got
its message (its echo) straight after its commit, so the notification skips it (by
origin).

Pure bookkeeping: frames are handed to a `Deliver` callback; no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Frame = dict[str, Any]
Key = tuple[str, str]
#: (connection, frame): send another side's message to a reader
Deliver = Callable[[Any, Frame], None]


@dataclass(slots=True)
class Subscription:
    key: Key
    conn: Any
    live: bool = False
    #: the highest message number this reader has (replayed, delivered or skipped)
    last_seq: int = 0
    #: (seq, origin, frame) that came while the `open` was being decided
    held: list[tuple[int, object, Frame]] = field(default_factory=list)


class Subscriptions:
    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._by_key: dict[Key, dict[Any, Subscription]] = {}
        self._by_conn: dict[Any, Subscription] = {}

    def __len__(self) -> int:
        return len(self._by_conn)

    def keys(self) -> list[Key]:
        return list(self._by_key)

    def holds(self, key: Key) -> bool:
        """Whether a connection of this node reads (or is opening) this mailbox."""
        return key in self._by_key

    def live(self) -> list[Subscription]:
        return [s for s in self._by_conn.values() if s.live]

    def pending(self, conn: Any, key: Key) -> None:
        """An `open` of `key` by `conn` is about to be decided: hold what comes."""
        self.drop(conn)
        sub = Subscription(key, conn)
        self._by_conn[conn] = sub
        self._by_key.setdefault(key, {})[conn] = sub

    def go_live(self, conn: Any, replayed_up_to: int) -> None:
        """The `open` committed and replayed up to that message number: send the rest."""
        sub = self._by_conn.get(conn)
        if sub is None or sub.live:
            return
        sub.live = True
        sub.last_seq = replayed_up_to
        held, sub.held = sub.held, []
        for seq, origin, frame in held:
            self._offer(sub, seq, origin, frame)

    def drop(self, conn: Any) -> None:
        """The connection closed its mailbox, its `open` failed, or it went away."""
        sub = self._by_conn.pop(conn, None)
        if sub is None:
            return
        readers = self._by_key.get(sub.key)
        if readers is not None:
            readers.pop(conn, None)
            if not readers:
                del self._by_key[sub.key]

    def message(self, key: Key, seq: int, origin: object, frame: Frame) -> None:
        """A committed message of mailbox `key` (from any node), in commit order."""
        readers = self._by_key.get(key)
        if not readers:
            return
        for sub in list(readers.values()):
            if sub.live:
                self._offer(sub, seq, origin, frame)
            else:
                sub.held.append((seq, origin, frame))

    def _offer(self, sub: Subscription, seq: int, origin: object, frame: Frame) -> None:
        if seq <= sub.last_seq:
            return  # already in its replay
        sub.last_seq = seq
        if origin is not sub.conn:
            self._deliver(sub.conn, frame)
