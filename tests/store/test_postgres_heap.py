"""The store's batch and read connections keep their backends' heap between batches
(store/postgres/connect.py): a batch that uses a little more memory than glibc's default
trim threshold faults its memory in once, not again at every batch. Read from the
backends' page-fault counts in /proc, so the server must run on this machine."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

import pigeonhole.store.postgres.connect as connect_module
from pigeonhole.store.postgres.encoding import encode_rows
from pigeonhole.store.postgres.shared import batch_spec
from pigeonhole.store.postgres.store import PostgresStore
from tests.support.postgres import postgres_url, run

__all__ = ["postgres_url"]

#: touches in one batch, of mailboxes that are gone (as when one was pruned meanwhile):
#: what parsing and joining its text (about 240 KB) allocates passes glibc's default trim
#: threshold (128 KiB) and stays under KEEP_HEAP's 4 MiB, and it writes nothing, so the
#: backends' shared memory (new pages, the WAL's buffers) faults nothing in either. Seen
#: here: about 5 faults per batch kept, about 440 not (1,500 touches: 6 and 7, under the
#: threshold either way; 10,000: some 850 and 1,100, a block over 4 MiB)
ROWS = 4000
#: batches of each kind (the writer's and the pool's) measured, after two unmeasured
ROUNDS = 12


def _batch(round_: int) -> str:
    return encode_rows(
        [["touch", "example.com/app", f"gone-{round_}-{i:06d}", 1e9 + i] for i in range(ROWS)]
    )


def _writing(batch: str) -> Callable[[dict[str, Any]], tuple[None, str]]:
    """A batch's decision that writes `batch`, whatever was loaded."""
    return lambda _loaded: (None, batch)


def _minor_faults(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            total += int(f.read().rsplit(")", 1)[1].split()[7])
    return total


async def _faults_per_batch(url: str) -> float:
    """Page faults of the store's backends per batch, writer and read pool alike."""
    store = PostgresStore(url)
    await store.open()
    admin = await asyncpg.connect(url)
    try:
        for i in range(2):  # the backends' first batches fault their memory in
            await store.decide(batch_spec([], ()), _writing(_batch(i)))
            await store.write(_batch(100 + i))
        pids = [
            r["pid"]
            for r in await admin.fetch(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ]
        if not all(os.path.exists(f"/proc/{pid}/stat") for pid in pids):
            pytest.skip("the PostgreSQL server runs elsewhere: its page faults are not here")
        before = _minor_faults(pids)
        for i in range(2, 2 + ROUNDS):
            await store.decide(batch_spec([], ()), _writing(_batch(i)))
            await store.write(_batch(100 + i))
        faults = _minor_faults(pids) - before
    finally:
        await admin.close()
        await store.close()
    return faults / (2 * ROUNDS)


def test_a_batch_over_the_trim_threshold_faults_nothing_again(postgres_url: str) -> None:
    assert run(lambda: _faults_per_batch(postgres_url)) < 30


def test_without_keeping_the_heap_every_such_batch_faults_it_in_again(
    postgres_url: str, monkeypatch: Any
) -> None:
    """The same batches on connections that skip KEEP_HEAP: what the other test guards."""
    monkeypatch.setattr(connect_module, "KEEP_HEAP", "SELECT 1")
    assert run(lambda: _faults_per_batch(postgres_url)) > 150
