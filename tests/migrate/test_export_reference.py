"""`export-usage --reference-usage-db`: the reference's usage history, read as it is.

The export runs while the real reference still serves (read-only, no lock held past the
snapshot), gives exactly the reference's rows with their row ids, and equals the export
of the same history after `import-reference`. One dataset follows the operator across
the switch: after the import, exporting Pigeonhole's data directory into the dataset made
from the reference adds only what Pigeonhole recorded since; a database that is not the
one the dataset came from is refused instead of silently skipping rows.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from pigeonhole.cli.usage import export_usage
from pigeonhole.pipeline import export as export_module
from pigeonhole.server.app import MailboxServer
from tests.migrate.migrate_support import bound, import_files, on_reference, rows
from tests.support.reference import ReferenceServer, reference_database, sha256
from tests.support.server import base_config

pytestmark = pytest.mark.slow
#: rows in the reference usage database of the locking test: several pages
ROWS = 12_000


def export(*args: str) -> Any:
    return CliRunner().invoke(export_usage, list(args), catch_exceptions=False)


def exported(root: Path, table: str) -> list[dict[str, Any]]:
    data = pads.dataset(root / table, format="parquet", partitioning="hive")
    return sorted(data.to_table().to_pylist(), key=lambda r: r["id"])


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def as_micros(value: dt.datetime | float) -> int:
    """Whole microseconds, the dataset's resolution (a float is rounded, as it does)."""
    if isinstance(value, dt.datetime):
        return (value - EPOCH) // dt.timedelta(microseconds=1)
    return round(value * 1e6)


async def test_reference_usage_exports_while_it_runs_and_continues_after_the_switch(
    reference: ReferenceServer, tmp_path: Path
) -> None:
    await on_reference(reference.url)
    before = sha256(reference.usage_db)
    dataset = tmp_path / "dataset"
    # the reference is still running
    result = export("--reference-usage-db", str(reference.usage_db), "--out", str(dataset))
    assert result.exit_code == 0, result.output
    assert reference.proc is not None and reference.proc.poll() is None
    assert sha256(reference.usage_db) == before
    ref_mail = rows(
        reference.usage_db,
        "SELECT rowid, app_id, for_nameplate, started, waiting_time, total_time, result"
        " FROM mailboxes ORDER BY rowid",
    )
    got = exported(dataset, "mailboxes")
    assert [
        (
            r["id"], r["app_id"], int(r["for_nameplate"]), as_micros(r["started"]),
            r["waiting_time"], r["total_time"], r["result"],
        )
        for r in got
    ] == [(*r[:3], as_micros(r[3]), *r[4:]) for r in ref_mail]  # fmt: skip
    ref_binds = rows(reference.usage_db, "SELECT rowid, side FROM client_versions ORDER BY rowid")
    assert [(r["id"], r["side"]) for r in exported(dataset, "client_versions")] == ref_binds
    ref_plates = rows(reference.usage_db, "SELECT rowid, result FROM nameplates ORDER BY rowid")
    assert [(r["id"], r["result"]) for r in exported(dataset, "nameplates")] == ref_plates

    reference.stop()
    data = tmp_path / "pigeonhole"
    import_files(reference.channel_db, reference.usage_db, data)
    # the imported history exports to exactly the same rows
    again = tmp_path / "again"
    assert export("--data-dir", str(data), "--out", str(again)).exit_code == 0
    for table in ("mailboxes", "nameplates", "client_versions"):
        assert exported(again, table) == exported(dataset, table), table

    # a fresh Pigeonhole database is not where the dataset came from: refused
    fresh = tmp_path / "fresh"
    async with MailboxServer(base_config(fresh)):
        pass
    refused = export("--data-dir", str(fresh), "--out", str(dataset))
    assert refused.exit_code == 1 and "made from another database" in refused.output

    # Pigeonhole records one more exchange; the same dataset takes exactly that row
    async with MailboxServer(base_config(data)) as srv:
        a, b = await bound(srv.url, "side-p"), await bound(srv.url, "side-q")
        mailbox = await a.claim("11")
        await b.claim("11")
        for client in (a, b):
            await client.open(mailbox)
            await client.release()
            await client.close(mailbox=mailbox, mood="happy")
            await client.disconnect()
    result = export("--data-dir", str(data), "--out", str(dataset))
    assert result.exit_code == 0, result.output
    after = exported(dataset, "mailboxes")
    assert after[: len(got)] == got
    assert [(r["id"], r["result"]) for r in after[len(got) :]] == [(len(got) + 1, "happy")]


def test_a_file_that_is_not_a_reference_usage_database_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "usage.sqlite"
    garbage.write_bytes(b"no database here\n" * 100)
    result = export("--reference-usage-db", str(garbage), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1 and "not a SQLite database" in result.output, result.output
    both = export(
        "--reference-usage-db", str(garbage), "--data-dir", str(tmp_path), "--out", str(tmp_path)
    )
    assert both.exit_code == 2 and "exactly one of" in both.output


def test_the_export_never_holds_off_the_references_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference's usage database is not in WAL mode: while a reader holds its lock,
    the reference cannot commit (it gives up after 5 s). The export reads in short
    statements, so between pages nothing is held: a commit that waits for nobody
    (timeout 0), tried between every two pages, always succeeds."""
    row = ("app", 1, 1_700_000_000.5, 10.0, 2.0, "happy")
    db = reference_database(
        tmp_path / "usage.sqlite", "usage-v2.sql", 2,
        "INSERT INTO mailboxes VALUES (?,?,?,?,?,?)", [row] * ROWS,
    )  # fmt: skip
    outcomes: list[str] = []
    to_arrow = export_module._to_arrow

    def commit_between_pages(table: str, rows: Any) -> Any:
        writer = sqlite3.connect(db, timeout=0)
        try:
            writer.execute("INSERT INTO mailboxes VALUES (?,?,?,?,?,?)", row)
            writer.commit()
            outcomes.append("committed")
        except sqlite3.OperationalError as err:
            outcomes.append(str(err))
        finally:
            writer.close()
        return to_arrow(table, rows)

    monkeypatch.setattr(export_module, "_to_arrow", commit_between_pages)
    pages = str(export_module.REFERENCE_READ_ROWS)  # one read per page here
    result = export(
        "--reference-usage-db", str(db), "--out", str(tmp_path / "out"), "--page-rows", pages
    )
    assert result.exit_code == 0, result.output
    assert len(outcomes) >= ROWS // export_module.REFERENCE_READ_ROWS
    assert set(outcomes) == {"committed"}
    assert len(exported(tmp_path / "out", "mailboxes")) >= ROWS
