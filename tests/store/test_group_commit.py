"""Group commit: a step's future resolves only after a sync that followed its write."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.store.group_commit import (
    RELEASE_PER_ITERATION,
    Commit,
    GroupCommitter,
    LocalSyncer,
)
from pigeonhole.store.sqlite import SqliteStore


class Journal:
    """A fake disk that records writes and syncs in order; a sync can be held back."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.release = threading.Event()
        self.release.set()
        #: a sync has begun (it may be held back by `release`)
        self.syncing = threading.Event()
        self.fail_write = False
        self.fail_sync = False
        self.failures: list[BaseException] = []

    def write(self, effects: list[fx.Effect]) -> None:
        if self.fail_write:
            raise RuntimeError("disk full")
        self.events.append("write " + ",".join(e.name for e in effects))  # type: ignore[attr-defined]

    def sync(self) -> None:
        self.syncing.set()
        self.release.wait(5)
        if self.fail_sync:
            raise OSError("EIO")
        self.events.append("sync")


def _np(name: str) -> fx.Effect:
    return fx.PutNameplate("app", name, "m" * 13)


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.fixture
async def committer(journal: Journal) -> GroupCommitter:
    executor = ThreadPoolExecutor(1)
    c = GroupCommitter(LocalSyncer(journal.write, journal.sync, executor), journal.failures.append)
    yield c  # type: ignore[misc]
    executor.shutdown(wait=True)


async def test_steps_of_one_iteration_share_a_write_and_a_sync(
    committer: GroupCommitter, journal: Journal
) -> None:
    a = committer.submit([_np("1")])
    b = committer.submit([_np("2"), _np("3")])
    assert a is b and a is not None and not a.done()
    await a
    assert journal.events == ["write 1,2,3", "sync"]
    assert committer.batches == 1 and committer.effects == 3


async def test_nothing_resolves_before_its_sync(
    committer: GroupCommitter, journal: Journal
) -> None:
    journal.release.clear()  # the disk is slow
    first = committer.submit([_np("1")])
    await _until(journal.syncing.is_set)  # written, now syncing
    second = committer.submit([_np("2")])
    third = committer.submit([_np("3")])
    # gathered behind the running sync, not written yet: the one writer thread is held
    # in the sync, so nothing more can be written until it is released
    assert first is not None and second is not None
    assert third is second  # one batch: one transaction, one sync
    assert not first.done() and not second.done()
    assert journal.events == ["write 1"]
    journal.release.set()
    await second
    assert first.done()
    assert journal.events == ["write 1", "sync", "write 2,3", "sync"]


async def test_a_barrier_waits_for_everything_before_it(
    committer: GroupCommitter, journal: Journal
) -> None:
    assert committer.submit([]) is None  # nothing outstanding
    journal.release.clear()
    step = committer.submit([_np("1")])
    barrier = committer.submit([])
    assert barrier is step
    await _until(journal.syncing.is_set)  # written, now syncing
    barrier = committer.submit([])
    assert barrier is step and barrier is not None and not barrier.done()
    journal.release.set()
    await committer.drain()
    assert barrier.done() and committer.submit([]) is None


async def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_failed_write_is_written_again_before_anything_later(
    journal: Journal,
) -> None:
    executor = ThreadPoolExecutor(1)
    recovered: list[bool] = []
    committer = GroupCommitter(
        LocalSyncer(journal.write, journal.sync, executor),
        journal.failures.append,
        on_recovered=lambda: recovered.append(True),
    )
    journal.fail_write = True
    step = committer.submit([_np("1")])
    assert step is not None
    await _until(lambda: len(journal.failures) >= 2)  # tried again, failed again
    assert not step.done() and committer.failing >= 2 and not recovered
    later = committer.submit([_np("2")])
    assert later is not None and later is not step
    tried = len(journal.failures)
    await _until(lambda: len(journal.failures) > tried)  # the failed batch, tried again
    assert journal.events == []  # nothing after the failed batch is written before it
    journal.fail_write = False  # space is back
    await asyncio.wait_for(later, 5)
    assert step.done() and step.exception() is None
    assert journal.events == ["write 1", "sync", "write 2", "sync"]
    assert recovered == [True] and committer.failing == 0
    executor.shutdown(wait=True)


async def test_a_failed_sync_writes_the_batch_again_then_what_gathered_meanwhile(
    committer: GroupCommitter, journal: Journal
) -> None:
    journal.fail_sync = True
    journal.release.clear()
    step = committer.submit([_np("1")])
    await _until(journal.syncing.is_set)  # written, now syncing
    gathered = committer.submit([_np("2")])
    assert step is not None and gathered is not None and gathered is not step
    journal.release.set()
    await _until(lambda: len(journal.failures) >= 1)
    assert not step.done() and not gathered.done()  # no reply is sent, none is lost
    journal.fail_sync = False
    await asyncio.wait_for(gathered, 5)
    assert step.exception() is None and gathered.exception() is None
    # the rolled-back transaction is written again whole, and only then the next batch
    assert journal.events[-4:] == ["write 1", "sync", "write 2", "sync"]
    assert "write 2" not in journal.events[:-2]


async def test_abandon_fails_the_failed_batch_and_what_gathered_behind_it(
    committer: GroupCommitter, journal: Journal
) -> None:
    journal.fail_write = True
    step = committer.submit([_np("1")])
    await _until(lambda: len(journal.failures) >= 1)
    gathered = committer.submit([_np("2")])
    assert step is not None and gathered is not None
    assert not await committer.drain(0.1)  # the drain cannot finish: storage is failing
    committer.abandon(RuntimeError("stopping"))
    for commit in (step, gathered):
        with pytest.raises(RuntimeError, match="stopping"):
            await commit
    assert committer.submit([]) is None  # nothing outstanding any more
    assert journal.events == []


async def test_a_durable_commit_calls_its_waiters_back_a_few_per_iteration() -> None:
    commit = Commit()
    calls: list[int] = []
    for i in range(10):
        commit.add_done_callback(lambda _c, i=i: calls.append(i))
    commit.resolve(per_iteration=4)
    # done for everyone at once; the first four now, in order
    assert commit.done() and commit.exception() is None
    assert calls == [0, 1, 2, 3]
    late: list[Commit] = []
    commit.add_done_callback(late.append)  # added meanwhile: called at once
    assert late == [commit]
    await asyncio.sleep(0)  # one loop iteration: the next four (socket reads between)
    assert calls == [0, 1, 2, 3, 4, 5, 6, 7]
    await asyncio.sleep(0)
    assert calls == list(range(10))
    await commit  # awaiting it does not wait for the slices


def test_without_a_slice_every_waiter_is_called_back_at_once() -> None:
    commit = Commit()
    calls: list[int] = []
    for i in range(10):
        commit.add_done_callback(lambda _c, i=i: calls.append(i))
    commit.resolve(RuntimeError("EIO"))  # no loop needed: nothing is scheduled
    assert calls == list(range(10)) and isinstance(commit.exception(), RuntimeError)


async def test_the_committer_releases_a_batch_in_slices_and_an_abandoned_one_at_once(
    committer: GroupCommitter, journal: Journal
) -> None:
    journal.release.clear()
    step = committer.submit([_np("1")])
    assert step is not None
    calls: list[int] = []
    waiters = 3 * RELEASE_PER_ITERATION + 1
    for i in range(waiters):
        step.add_done_callback(lambda _c, i=i: calls.append(i))
    journal.release.set()
    await step
    assert RELEASE_PER_ITERATION <= len(calls) < waiters  # the rest come in later slices
    for _ in range(4):
        await asyncio.sleep(0)
    assert calls == list(range(waiters))
    # a batch given up on (stopping while storage fails) fails every waiter at once
    journal.fail_sync = True
    failed = committer.submit([_np("2")])
    assert failed is not None
    errors: list[BaseException | None] = []
    for _ in range(waiters):
        failed.add_done_callback(lambda c: errors.append(c.exception()))
    await _until(lambda: bool(journal.failures))
    committer.abandon(OSError("EIO"))
    with pytest.raises(OSError, match="EIO"):
        await failed
    assert len(errors) == waiters and all(isinstance(e, OSError) for e in errors)


def test_store_sync_before_and_after_writes(tmp_path: Path) -> None:
    """`sync` works with no log yet, then fdatasyncs the logs the writes created."""
    store = SqliteStore(tmp_path / "channel.sqlite", tmp_path / "usage.sqlite")
    store.open()
    try:
        store.sync()
        store.write([_np("1")])
        store.sync()
        assert (tmp_path / "channel.sqlite-wal").stat().st_size > 0
        assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    finally:
        store.close()


async def test_sync_on_the_loop_thread_writes_then_syncs_then_resolves(journal: Journal) -> None:
    """With no executor (`--commit-sync loop`) each batch is written and synced in turn."""
    failures: list[BaseException] = []
    committer = GroupCommitter(LocalSyncer(journal.write, journal.sync), failures.append)
    first = committer.submit([_np("1")])
    second = committer.submit([_np("2")])
    assert first is second and first is not None and not first.done()
    await first
    third = committer.submit([_np("3")])
    assert third is not None
    await third
    assert journal.events == ["write 1,2", "sync", "write 3", "sync"]
    journal.fail_sync = True
    failing = committer.submit([_np("4")])
    assert failing is not None
    await _until(lambda: bool(failures))
    assert not failing.done()
    journal.fail_sync = False
    await asyncio.wait_for(failing, 5)  # written again, then synced
    assert journal.events[-2:] == ["write 4", "sync"]


async def test_a_cancelled_awaiter_leaves_the_others_waiting() -> None:
    """One task awaiting a batch is cancelled (a connection closing at shutdown): the
    others awaiting the same batch, the drain among them, still get its end."""
    commit = Commit()
    cancelled = asyncio.create_task(_await(commit))
    other = asyncio.create_task(_await(commit))
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    assert cancelled.cancelled() and not other.done()
    commit.resolve()
    assert await other == "durable"


async def _await(commit: Commit) -> str:
    await commit
    return "durable"
