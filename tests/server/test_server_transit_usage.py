"""Transit relay records submitted to a running server's committer land in its store,
and `export-usage` gives them back as the dataset's transit table, on either store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest

from pigeonhole.pipeline import ExportConfig, export_usage
from pigeonhole.protocol.effects import UsageTransit
from tests.support.server import usage_rows

pytestmark = pytest.mark.asyncio

COLUMNS = ("started", "total_time", "waiting_time", "total_bytes", "result")


async def test_transit_records_are_written_durably_in_order(make_server):
    """What the relay's sink submits is in the `transit` table once its commit resolves,
    on SQLite and PostgreSQL alike, with every field as given."""
    records = [
        UsageTransit(1_700_000_000.0, 12.5, 0.75, 41_943_040, "happy"),
        UsageTransit(1_700_000_003.0, 30.0, None, 0, "lonely"),
        UsageTransit(1_700_000_004.0, 0.01, None, 0, "errory"),
        UsageTransit(1_700_000_005.0, 2.0, None, 64, "impatient"),
    ]
    async with make_server() as srv:
        commit = srv.ctx.committer.submit(records[:2])
        assert commit is not None
        await commit
        later = srv.ctx.committer.submit(records[2:])
        assert later is not None
        await later
        rows = usage_rows(srv.config, "transit")
    assert [tuple(row[c] for c in COLUMNS) for row in rows] == [
        (r.started, r.total_time, r.waiting_time, r.total_bytes, r.result) for r in records
    ]
    assert [row["id"] for row in rows] == sorted(row["id"] for row in rows)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("commit_sync", ["thread", "loop"])
async def test_the_in_loop_writer_writes_transit_records_too(make_server, commit_sync):
    """With --commit-sync thread or loop the loop's own connection writes the batch."""
    record = UsageTransit(1_700_000_000.0, 3.0, 1.0, 10_000, "happy")
    async with make_server(commit_sync=commit_sync) as srv:
        commit = srv.ctx.committer.submit([record])
        assert commit is not None
        await commit
        rows = usage_rows(srv.config, "transit")
    assert [tuple(row[c] for c in COLUMNS) for row in rows] == [
        (1_700_000_000.0, 3.0, 1.0, 10_000, "happy")
    ]


async def test_committed_transit_records_export_as_the_transit_table(make_server, tmp_path: Path):
    records = [
        UsageTransit(1_795_000_010.0, 4.0, 0.5, 1_000_000, "happy"),
        UsageTransit(1_795_000_011.0, 9.0, None, 0, "redundant"),
    ]
    async with make_server() as srv:
        commit = srv.ctx.committer.submit(records)
        assert commit is not None
        await commit
        config = srv.config
    out = tmp_path / "dataset"
    export = ExportConfig(db_path=config.data_dir / "usage.sqlite", out_dir=out, store=config.store)
    # the exporter runs its own event loop for PostgreSQL: not on this test's
    result = await asyncio.to_thread(export_usage, export)
    assert result.cursor["transit"] == 2
    data = pads.dataset(out / "transit", partitioning="hive", format="parquet").to_table()
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert [(r["started"].timestamp(), *(r[c] for c in COLUMNS[1:])) for r in rows] == [
        (r.started, r.total_time, r.waiting_time, r.total_bytes, r.result) for r in records
    ]
