"""The store helper process: a real helper writing real SQLite files, answering on a pipe."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.store.errors import StoreHelperError
from pigeonhole.store.group_commit import GroupCommitter
from pigeonhole.store.sqlite import WRITABLE_EFFECTS, SqliteStore
from pigeonhole.store.sqlite.helper import StoreHelper
from pigeonhole.store.sqlite.helper_main import HEADER, decode_effects, encode_effects
from tests.support.process import gone


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    """Both databases, created as the server creates them before it starts the helper."""
    channel, usage = tmp_path / "channel.sqlite", tmp_path / "usage.sqlite"
    store = SqliteStore(channel, usage)
    store.open()
    store.close()
    return channel, usage


@pytest.fixture
async def helper(paths: tuple[Path, Path]) -> StoreHelper:
    helper = StoreHelper(*paths)
    helper.open()
    yield helper  # type: ignore[misc]
    helper.close()


async def durable(helper: StoreHelper, effects: list[fx.Effect]) -> BaseException | None:
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    helper.start(effects, lambda error: done.set_result(error))
    return await asyncio.wait_for(done, 15)


def nameplates(channel: Path) -> list[str]:
    with sqlite3.connect(channel) as reader:
        return [row[0] for row in reader.execute("SELECT name FROM nameplates ORDER BY name")]


#: a value of each field type the effects use; `object` is a message id (any JSON)
SAMPLE_VALUES: dict[str, object] = {
    "str": "x",
    "float": 1700000000.123456,
    "int": 3,
    "bool": True,
    "str | None": None,
    "float | None": 2.5,
    "int | None": None,
    "object": {"n": [1, "x"]},
}


def test_every_effect_type_survives_the_pipe() -> None:
    samples: list[fx.Effect] = [
        cls(*[SAMPLE_VALUES[str(f.type)] for f in dataclasses.fields(cls)])
        for cls in WRITABLE_EFFECTS
    ]
    encoded = encode_effects(samples)
    (size,) = HEADER.unpack(encoded[: HEADER.size])
    assert size == len(encoded) - HEADER.size
    assert decode_effects(encoded[HEADER.size :]) == samples
    assert [type(e) for e in decode_effects(encoded[HEADER.size :])] == list(WRITABLE_EFFECTS)


async def test_each_batch_is_written_and_answered_in_order(
    helper: StoreHelper, paths: tuple[Path, Path]
) -> None:
    answers: list[tuple[int, BaseException | None]] = []
    finished = asyncio.Event()
    for i in range(5):
        helper.start(
            [fx.PutNameplate("app", str(i), f"m{i}")], lambda e, i=i: answers.append((i, e))
        )
    helper.start([], lambda error: finished.set())  # nothing to write: a sync alone
    await asyncio.wait_for(finished.wait(), 15)
    assert answers == [(i, None) for i in range(5)]
    assert nameplates(paths[0]) == ["0", "1", "2", "3", "4"]
    assert helper.started == 1


async def test_a_failed_transaction_is_rolled_back_whole_and_reported(
    helper: StoreHelper, paths: tuple[Path, Path]
) -> None:
    # the message violates NOT NULL (no body): the nameplate before it must not stay either
    bad = fx.PutMessage("app", "m9", "side", "pake", None, 1.0, "id", 1)  # type: ignore[arg-type]
    error = await durable(helper, [fx.PutNameplate("app", "9", "m9"), bad])
    assert isinstance(error, StoreHelperError)
    assert nameplates(paths[0]) == []
    # the helper goes on
    assert await durable(helper, [fx.PutNameplate("app", "10", "m10")]) is None
    assert nameplates(paths[0]) == ["10"]


async def test_a_killed_helper_fails_what_it_owed_and_the_next_batch_starts_another(
    helper: StoreHelper, paths: tuple[Path, Path]
) -> None:
    first = helper.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)  # our own child
    # the request either finds the pipe broken or waits for an answer that never comes
    error = await durable(helper, [fx.PutNameplate("app", "lost", "m")])
    assert isinstance(error, StoreHelperError)
    assert await durable(helper, [fx.PutNameplate("app", "kept", "m")]) is None
    assert helper.started == 2
    assert helper.pid not in (None, first)
    assert "kept" in nameplates(paths[0])


async def test_the_helper_outlives_signals_meant_for_the_server_group(
    helper: StoreHelper, paths: tuple[Path, Path]
) -> None:
    """Ctrl-C or a service manager's SIGTERM reaches the whole process group; the server
    stops gracefully and still needs its helper for the last batches."""
    assert await durable(helper, []) is None  # started and serving (handlers installed)
    pid = helper.pid
    assert pid is not None
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        os.kill(pid, sig)  # our own child
    assert await durable(helper, [fx.PutNameplate("app", "after", "m")]) is None
    assert helper.pid == pid and helper.started == 1
    assert nameplates(paths[0]) == ["after"]


async def test_a_batch_bigger_than_the_pipe_buffer_arrives_whole(
    helper: StoreHelper, paths: tuple[Path, Path]
) -> None:
    batch: list[fx.Effect] = [fx.PutNameplate("app", f"{i:05}", "m" * 40) for i in range(3000)]
    assert len(encode_effects(batch)) > 64 * 1024
    assert await durable(helper, batch) is None
    assert len(nameplates(paths[0])) == 3000


async def test_close_stops_the_helper(paths: tuple[Path, Path]) -> None:
    helper = StoreHelper(*paths)
    helper.open()
    pid = helper.pid
    assert pid is not None and not gone(pid)
    assert await durable(helper, []) is None
    helper.close()
    assert helper.pid is None
    assert gone(pid)


async def test_group_commit_resolves_once_the_helper_made_the_batch_durable(
    helper: StoreHelper, paths: tuple[Path, Path]
) -> None:
    failures: list[BaseException] = []
    committer = GroupCommitter(helper, failures.append)
    first = committer.submit([fx.PutNameplate("app", "3", "m3")])
    second = committer.submit([fx.PutNameplate("app", "4", "m4")])
    assert first is second and first is not None and not first.done()
    await asyncio.wait_for(first, 15)
    assert nameplates(paths[0]) == ["3", "4"]
    third = committer.submit([fx.PutNameplate("app", "5", "m5")])
    assert third is not None and third is not first
    await asyncio.wait_for(third, 15)
    assert committer.batches == 2 and failures == []
    assert nameplates(paths[0]) == ["3", "4", "5"]


async def test_group_commit_writes_again_the_batch_the_helper_could_not_write(
    helper: StoreHelper,
) -> None:
    failures: list[BaseException] = []
    committer = GroupCommitter(helper, failures.append)
    bad = fx.PutMessage("app", "m", "side", "pake", None, 1.0, "id", 1)  # type: ignore[arg-type]
    commit = committer.submit([bad])
    assert commit is not None
    for _ in range(1500):  # refused, written again after a pause, refused again
        if len(failures) >= 2:
            break
        await asyncio.sleep(0.01)
    assert len(failures) >= 2 and all(isinstance(f, StoreHelperError) for f in failures)
    assert not commit.done()  # nobody is told it is stored, nor that it is lost
    committer.abandon(StoreHelperError("given up"))
    with pytest.raises(StoreHelperError, match="given up"):
        await commit
