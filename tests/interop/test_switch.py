"""Switching from the reference server with the real clients: nothing waiting is lost.

On the real reference (magic-wormhole-mailbox-server 0.8.0, `twist wormhole-mailbox` on
loopback with a channel and a usage database): real transfers with the `wormhole` CLI and
wormhole-william, one with a wrong code (scary), then two Python senders left waiting (a
text and a file). The reference is stopped with SIGTERM, `pigeonhole import-reference`
runs, and `pigeonhole serve` starts on the same port with the imported data directory.
The receivers start only then; the waiting senders reconnect by themselves and both
transfers complete.

The usage history: `export-usage --reference-usage-db` while the reference runs (its
dataset's rows, read with DuckDB, counted per day and result), and `export-usage` of the
imported data directory after the switch through `report` (the report's finished and
started counts per day and result, read with DuckDB from its Parquet output); each equals
a plain SQLite count over the databases' own rows.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tests.support.interop import Harness, PairResult, check_success, check_wrong_code
from tests.support.interop_servers import Server, wait_for_pake
from tests.support.netns import Net
from tests.support.reference import ReferenceServer, sha256
from tests.support.wormhole_clients import WORMHOLE_WILLIAM, Codes, random_file, random_text

pytestmark = [pytest.mark.interop, pytest.mark.slow]

#: (day, result) -> (finished, started)
Counts = dict[tuple[str, str], tuple[int, int]]


def pigeonhole(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pigeonhole", *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"pigeonhole {args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def sqlite_counts(db: Path, after_id: int = 0, id_column: str = "rowid") -> Counts:
    """Mailbox rows per (UTC day, result): finished by end day, started by start day."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            f"SELECT date(started + total_time, 'unixepoch'), date(started, 'unixepoch'), result"
            f" FROM mailboxes WHERE {id_column} > ?",
            (after_id,),
        ).fetchall()
    finally:
        con.close()
    finished = Counter((end, result) for end, _, result in rows)
    started = Counter((start, result) for _, start, result in rows)
    return {k: (finished[k], started[k]) for k in finished | started}


def dataset_counts(dataset: Path) -> Counts:
    """The dataset's mailbox rows per (UTC day, result), read with DuckDB, as sqlite_counts."""
    rows = duckdb.sql(
        f"""SELECT epoch(started), total_time, result
        FROM read_parquet('{dataset}/mailboxes/*/*.parquet', hive_partitioning = true)"""
    ).fetchall()

    def day(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.UTC).date().isoformat()

    finished = Counter((day(start + total), result) for start, total, result in rows)
    started = Counter((day(start), result) for start, _, result in rows)
    return {k: (finished[k], started[k]) for k in finished | started}


def report_counts(dataset: Path, out: Path) -> Counts:
    """`report` on the dataset, then its daily_results read back with DuckDB."""
    pigeonhole("report", "--input", str(dataset), "--output", str(out), "--quiet")
    rows = duckdb.sql(
        f"""SELECT CAST(day AS VARCHAR), result, sum(count), sum(started_count)
        FROM read_parquet('{out}/tables/daily_results/*/*.parquet', hive_partitioning = true)
        GROUP BY ALL"""
    ).fetchall()
    return {(day, result): (int(f), int(s)) for day, result, f, s in rows if f or s}


def add(a: Counts, b: Counts) -> Counts:
    return {
        k: (a.get(k, (0, 0))[0] + b.get(k, (0, 0))[0], a.get(k, (0, 0))[1] + b.get(k, (0, 0))[1])
        for k in a.keys() | b.keys()
    }


def test_waiting_transfers_finish_after_the_switch_and_history_carries_over(
    net: Net, codes: Codes, tmp_path: Path
) -> None:
    reference = ReferenceServer(tmp_path / "reference")
    reference.start()
    server: Server | None = None
    waiting = []
    try:
        on_ref = Harness(net, reference, tmp_path / "on-reference", codes)  # type: ignore[arg-type]
        on_ref.transfer("py", "py", random_text(), "ref-py-py")
        if WORMHOLE_WILLIAM:
            on_ref.transfer("ww", "py", random_text(), "ref-ww-py")
            on_ref.transfer("py", "ww", random_text(), "ref-py-ww")
        code = codes.next()
        wrong = on_ref.pair(
            "py", "py", random_text(), "ref-wrong", code=code, receiver_code=code + "x"
        )
        check_wrong_code(wrong)
        # the reference's usage database exported while it runs (before the waiting senders
        # start), checked with DuckDB; the report itself runs once, on the whole history
        before = sqlite_counts(reference.usage_db)
        assert {result for _, result in before} >= {"happy", "scary"}
        pigeonhole(
            "export-usage", "--reference-usage-db", str(reference.usage_db),
            "--out", str(tmp_path / "ref-dataset"),
        )  # fmt: skip
        assert dataset_counts(tmp_path / "ref-dataset") == before
        # the senders that are waiting when the reference stops
        payloads = [random_text(), random_file(tmp_path / "files")]
        receivers = ["ww" if WORMHOLE_WILLIAM else "py", "py"]
        code_list = [codes.next() for _ in payloads]
        waiting = [
            on_ref.start("py", "send", c, p, f"waiting-{i}")
            for i, (c, p) in enumerate(zip(code_list, payloads, strict=True))
        ]
        for sender in waiting:
            sender.wait_code()
        wait_for_pake(reference, code_list)  # they wait: claimed, open, PAKE stored
        assert all(s.returncode is None for s in waiting), [s.describe() for s in waiting]

        # the switch
        reference.stop()
        files = {p: sha256(p) for p in (reference.channel_db, reference.usage_db)}
        data = tmp_path / "pigeonhole"
        out = pigeonhole(
            "import-reference", "--channel-db", str(reference.channel_db),
            "--usage-db", str(reference.usage_db), "--data-dir", str(data),
        )  # fmt: skip
        imported = dict(line.strip().split(": ") for line in out.splitlines()[1:] if ": " in line)
        # the two waiting senders' channels (a finished client may leave its mailbox open)
        assert int(imported["nameplates"]) >= 2 and int(imported["mailboxes"]) >= 2, out
        assert {p: sha256(p) for p in files} == files
        server = Server(data, tmp_path / "pigeonhole.log", port=reference.port)
        server.start()
        on_ours = Harness(net, server, tmp_path / "on-pigeonhole", codes)
        started = [
            on_ours.start(kind, "receive", c, p, f"waiting-{i}")  # type: ignore[arg-type]
            for i, (kind, c, p) in enumerate(zip(receivers, code_list, payloads, strict=True))
        ]
        for client in [*waiting, *started]:
            client.wait()
        for s, r, c, p in zip(waiting, started, code_list, payloads, strict=True):
            check_success(PairResult(s, r, c, p), server)
        on_ours.transfer("py", "py", random_text(), "after-switch")
        server.stop()

        # the history: the reference's rows, then what Pigeonhole recorded after them
        last_ref_id = (
            sqlite3.connect(reference.usage_db)
            .execute("SELECT max(rowid) FROM mailboxes")
            .fetchone()[0]
        )
        since = sqlite_counts(data / "usage.sqlite", last_ref_id, id_column="id")
        # the file transfer and the one after the switch at least: wormhole-william (the
        # text's receiver) does not always close its side, and then its mailbox stays open
        assert sum(f for f, _ in since.values()) >= 2
        pigeonhole("export-usage", "--data-dir", str(data), "--out", str(tmp_path / "dataset"))
        got = report_counts(tmp_path / "dataset", tmp_path / "report")
        assert got == add(sqlite_counts(reference.usage_db), since)
    finally:
        for client in waiting:
            client.kill()
        reference.stop()
        if server is not None:
            server.stop()
