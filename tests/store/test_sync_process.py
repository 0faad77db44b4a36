"""The sync helper process: real helper, real SQLite logs, answers through a real pipe."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.store.group_commit import GroupCommitter
from pigeonhole.store.sqlite import SqliteStore
from pigeonhole.store.sync_process import ProcessSync, SyncHelperError


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(tmp_path / "channel.sqlite", tmp_path / "usage.sqlite")
    store.open()
    yield store  # type: ignore[misc]
    store.close()


async def sync_once(syncer: ProcessSync, timeout: float = 10) -> BaseException | None:
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    syncer.start(lambda error: done.set_result(error))
    return await asyncio.wait_for(done, timeout)


def helper_exited(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_answers_come_in_order_one_per_request(store: SqliteStore) -> None:
    syncer = ProcessSync(store.wal_paths())
    syncer.open()
    try:
        store.write([fx.PutNameplate("app", "1", "m1")])
        answers: list[tuple[int, BaseException | None]] = []
        finished = asyncio.Event()
        for i in range(5):
            syncer.start(lambda error, i=i: answers.append((i, error)))
        syncer.start(lambda error: finished.set())
        await asyncio.wait_for(finished.wait(), 10)
        assert answers == [(i, None) for i in range(5)]
        assert syncer.started == 1
    finally:
        syncer.close()


async def test_a_log_that_does_not_exist_yet_is_skipped(tmp_path: Path) -> None:
    syncer = ProcessSync([tmp_path / "nothing-written-yet.sqlite-wal"])
    try:
        assert await sync_once(syncer) is None
    finally:
        syncer.close()


async def test_a_failed_fdatasync_is_reported(tmp_path: Path) -> None:
    # fdatasync on a character device fails (EINVAL): the helper must say so, not "k"
    syncer = ProcessSync([Path("/dev/null")])
    try:
        error = await sync_once(syncer)
        assert isinstance(error, SyncHelperError)
        assert "fdatasync failed" in str(error)
    finally:
        syncer.close()


async def test_a_killed_helper_fails_what_it_owed_and_the_next_sync_starts_another(
    store: SqliteStore,
) -> None:
    syncer = ProcessSync(store.wal_paths())
    syncer.open()
    try:
        first = syncer.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # our own child
        # the request either finds the pipe broken or waits for an answer that never comes
        error = await sync_once(syncer)
        assert isinstance(error, SyncHelperError)
        store.write([fx.PutNameplate("app", "2", "m2")])
        assert await sync_once(syncer) is None
        assert syncer.started == 2
        assert syncer.pid not in (None, first)
    finally:
        syncer.close()


async def test_close_stops_the_helper(store: SqliteStore) -> None:
    syncer = ProcessSync(store.wal_paths())
    syncer.open()
    pid = syncer.pid
    assert pid is not None and not helper_exited(pid)
    assert await sync_once(syncer) is None
    syncer.close()
    assert syncer.pid is None
    assert helper_exited(pid)


async def test_group_commit_resolves_after_the_helper_synced_the_batch(
    store: SqliteStore, tmp_path: Path
) -> None:
    syncer = ProcessSync(store.wal_paths())
    failures: list[BaseException] = []
    committer = GroupCommitter(store.write, store.sync, failures.append, None, syncer=syncer)
    try:
        first = committer.submit([fx.PutNameplate("app", "3", "m3")])
        second = committer.submit([fx.PutNameplate("app", "4", "m4")])
        assert first is second and first is not None and not first.done()
        await asyncio.wait_for(first, 10)
        # written while the first sync ran: the next batch, resolved by the next answer
        third = committer.submit([fx.PutNameplate("app", "5", "m5")])
        assert third is not None and third is not first
        await asyncio.wait_for(third, 10)
        assert committer.batches == 2 and failures == []
        with sqlite3.connect(tmp_path / "channel.sqlite") as reader:
            names = [row[0] for row in reader.execute("SELECT name FROM nameplates ORDER BY 1")]
        assert names == ["3", "4", "5"]
        assert syncer.started == 1
    finally:
        syncer.close()


async def test_group_commit_fails_the_batch_when_the_helper_cannot_sync(
    store: SqliteStore,
) -> None:
    syncer = ProcessSync([*store.wal_paths(), Path("/dev/null")])
    failures: list[BaseException] = []
    committer = GroupCommitter(store.write, store.sync, failures.append, None, syncer=syncer)
    try:
        commit = committer.submit([fx.PutNameplate("app", "6", "m6")])
        assert commit is not None
        with pytest.raises(SyncHelperError):
            await asyncio.wait_for(commit, 10)
        assert len(failures) == 1
    finally:
        syncer.close()
