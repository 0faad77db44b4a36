"""The SQLite store writes a batch's rows together, beside any crowd (schema version 3).

A commit puts every page it changed in the write-ahead log. With rows keyed by creation
order, the exchanges in flight share the last pages of each table, so the same batch
writes about as many pages beside 5,000 waiting channels as beside none; keyed by (app,
name) and (app, mailbox id), as version 2 was, each new row landed on a page of its own
among the crowd's (60 exchanges begun: 9 log frames alone, 109 beside 5,000).
"""

from __future__ import annotations

import random
from pathlib import Path

from pigeonhole.protocol import effects as fx
from pigeonhole.store.sqlite import SqliteStore

APP = "app"
WAL_HEADER, FRAME_HEADER = 32, 24


def _channel(n: int, mailbox: str, now: float) -> list[fx.Effect]:
    """What a sender's allocate, claim, open and `pake` write."""
    name = str(n)
    return [
        fx.PutNameplate(APP, name, mailbox, "owner"),
        fx.PutNameplateSide(APP, name, "a", True, now),
        fx.PutMailbox(APP, mailbox, True, now, "owner"),
        fx.PutMailboxSide(APP, mailbox, "a", True, now, None),
        fx.PutMessage(APP, mailbox, "a", "pake", "ab" * 40, now, "1", 10 * n, "owner"),
    ]


def _finish(n: int, mailbox: str, now: float) -> list[fx.Effect]:
    """The receiver's claim, open and messages, then both sides close."""
    name = str(n)
    return [
        fx.PutNameplateSide(APP, name, "b", True, now),
        fx.PutMailboxSide(APP, mailbox, "b", True, now, None),
        fx.PutMessage(APP, mailbox, "b", "pake", "cd" * 40, now, "2", 10 * n + 1, "owner"),
        fx.PutMessage(APP, mailbox, "a", "version", "ef" * 60, now, "3", 10 * n + 2, "owner"),
        fx.DeleteNameplate(APP, name),
        fx.DeleteMailbox(APP, mailbox),
    ]


def _frames(store: SqliteStore, path: Path, batch: list[fx.Effect]) -> int:
    """Log frames one committed batch wrote (the log emptied first)."""
    store.db.execute("PRAGMA main.wal_checkpoint(TRUNCATE)")
    store.write(batch)
    page = store.db.execute("PRAGMA main.page_size").fetchone()[0]
    wal = path.with_name(path.name + "-wal")
    return (wal.stat().st_size - WAL_HEADER) // (FRAME_HEADER + page)


def _pages_for_a_batch(tmp_path: Path, crowd: int) -> tuple[int, int]:
    path = tmp_path / f"crowd-{crowd}" / "channel.sqlite"
    store = SqliteStore(path, path.with_name("usage.sqlite"))
    store.open()
    try:
        draw = random.Random(7)
        ids = [
            "".join(draw.choices("abcdefghijklmnopqrstuvwxyz234567", k=13))
            for _ in range(crowd + 60)
        ]
        waiting: list[fx.Effect] = []
        for n in range(crowd):  # the crowd arrives and waits
            waiting += _channel(n + 1000, ids[n], 1.0)
            if len(waiting) > 2_000:
                store.write(waiting)
                waiting = []
        store.write(waiting)
        flight = [(n + 100_000, ids[crowd + n]) for n in range(60)]
        begun = _frames(store, path, [e for n, m in flight for e in _channel(n, m, 2.0)])
        finished = _frames(store, path, [e for n, m in flight for e in _finish(n, m, 3.0)])
        return begun, finished
    finally:
        store.close()


def test_a_batch_writes_as_many_pages_beside_a_crowd_as_alone(tmp_path: Path) -> None:
    alone = _pages_for_a_batch(tmp_path, 0)
    beside = _pages_for_a_batch(tmp_path, 5_000)
    # the same 60 exchanges begun, then finished: 9 and 9 frames alone; beside the crowd
    # each table's tree is a level deeper, so a parent page may change with its last leaf
    # (13 and 15 here): at most twice as many, however big the crowd
    assert beside[0] <= 2 * alone[0], (alone, beside)
    assert beside[1] <= 2 * alone[1], (alone, beside)
