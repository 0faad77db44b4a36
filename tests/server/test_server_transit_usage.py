"""Transit relay records submitted to a running server's committer land in its store."""

from __future__ import annotations

import pytest
from server_support import usage_rows

from pigeonhole.protocol.effects import UsageTransit

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
        commit = srv.committer.submit(records[:2])
        assert commit is not None
        await commit
        later = srv.committer.submit(records[2:])
        assert later is not None
        await later
        rows = usage_rows(srv.config, "transit")
    assert [tuple(row[c] for c in COLUMNS) for row in rows] == [
        (r.started, r.total_time, r.waiting_time, r.total_bytes, r.result) for r in records
    ]
    assert [row["id"] for row in rows] == sorted(row["id"] for row in rows)
