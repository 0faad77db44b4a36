"""`pigeonhole backup`: one consistent copy of the data directory's databases, or nothing.

Real SQLite files written by the real store: a writer commits to channel.sqlite and
usage.sqlite in one transaction (as the server does) while the backup runs, and the copy
holds as many rows in one as in the other. An existing --out is refused; a disk that
fills up (a small tmpfs of the test's own) leaves no directory and no partial file.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from pigeonhole.protocol import effects as fx
from pigeonhole.store.backup import backup
from pigeonhole.store.errors import BackupError
from pigeonhole.store.sqlite import SqliteStore
from tests.support.process import PIGEONHOLE
from tests.support.tmpfs import MiB, small_tmpfs

#: commits the writer makes at most (it stops once the backup is done)
MAX_COMMITS = 200_000


def effects(n: int) -> list[fx.Effect]:
    """One message and one usage row: the two files in one transaction (the first 50 make
    the mailboxes the messages go to)."""
    body = os.urandom(64).hex()
    made: list[fx.Effect] = [fx.PutMailbox("app", f"m{n}", False, float(n))] if n < 50 else []
    return [
        *made,
        fx.PutMessage("app", f"m{n % 50}", "a", f"p{n}", body, float(n), n, n),
        fx.UsageMailbox("app", True, float(n), 1.0, 2.0, "happy"),
    ]


def fill(data_dir: Path, commits: int) -> SqliteStore:
    store = SqliteStore(data_dir / "channel.sqlite", data_dir / "usage.sqlite")
    store.open()
    for n in range(commits):
        store.write(effects(n))
    return store


def counts(directory: Path) -> tuple[int, int]:
    with sqlite3.connect(directory / "channel.sqlite") as channel:
        (messages,) = channel.execute("SELECT count(*) FROM messages").fetchone()
    with sqlite3.connect(directory / "usage.sqlite") as usage:
        (mailboxes,) = usage.execute("SELECT count(*) FROM mailboxes").fetchone()
    return messages, mailboxes


def test_backup_while_writing_is_one_snapshot_of_both_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = fill(data, 500)
    (data / "archive.sqlite").unlink(missing_ok=True)
    with sqlite3.connect(data / "archive.sqlite") as archive:
        archive.execute("CREATE TABLE envelopes (hash BLOB PRIMARY KEY)")
        archive.execute("INSERT INTO envelopes VALUES (x'01')")
    done = threading.Event()
    written = [500]

    def writer() -> None:
        while not done.is_set() and written[0] < MAX_COMMITS:
            store.write(effects(written[0]))
            written[0] += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        copies = []
        for n in range(3):  # each one while the writer commits
            before = written[0]
            copied = backup(data, tmp_path / f"backup{n}")
            copies.append((before, written[0], copied))
    finally:
        done.set()
        thread.join()
        store.close()
    for n, (before, after, copied) in enumerate(copies):
        assert [c.name for c in copied] == ["channel.sqlite", "usage.sqlite", "archive.sqlite"]
        messages, mailboxes = counts(tmp_path / f"backup{n}")
        assert messages == mailboxes  # both files from one snapshot
        assert before <= messages <= after
        assert sorted(os.listdir(tmp_path / f"backup{n}")) == [
            "archive.sqlite",
            "channel.sqlite",
            "usage.sqlite",
        ]  # no write-ahead log beside them: each file stands alone
    assert copies[-1][1] > copies[0][0], "the writer committed while the backups ran"
    # and the copy opens as a store
    again = SqliteStore(
        tmp_path / "backup0" / "channel.sqlite", tmp_path / "backup0" / "usage.sqlite"
    )
    again.open()
    again.close()


def run_backup(data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PIGEONHOLE, "backup", "--data-dir", str(data), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_existing_directory_is_refused(tmp_path: Path) -> None:
    fill(tmp_path / "data", 3).close()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    refused = run_backup(tmp_path / "data", tmp_path / "taken")
    assert refused.returncode == 1
    assert "already exists: a backup goes to a new directory" in refused.stderr
    assert os.listdir(tmp_path / "taken") == ["keep.txt"]
    made = run_backup(tmp_path / "data", tmp_path / "fresh")
    assert made.returncode == 0, made.stderr
    assert "channel.sqlite" in made.stdout and counts(tmp_path / "fresh") == (3, 3)


def test_not_a_data_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    refused = run_backup(tmp_path / "empty", tmp_path / "out")
    assert refused.returncode == 1 and "holds no database" in refused.stderr
    with pytest.raises(BackupError, match="is not a directory"):
        backup(tmp_path / "missing", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_full_disk_leaves_nothing(tmp_path: Path) -> None:
    store = fill(tmp_path / "data", 0)
    big = os.urandom(4000).hex()  # about 4 MiB of bodies in all
    store.write([fx.PutMailbox("app", "m", False, 1.0)])
    for n in range(1000):
        store.write([fx.PutMessage("app", "m", "a", f"p{n}", big, 1.0, n, n)])
    store.close()
    with small_tmpfs(tmp_path / "small", 2 * MiB) as small:
        refused = run_backup(tmp_path / "data", small / "backup")
        assert refused.returncode == 1
        assert "was not written: no space left on the disk" in refused.stderr, refused.stderr
        assert os.listdir(small) == []  # neither the backup nor its partial directory
