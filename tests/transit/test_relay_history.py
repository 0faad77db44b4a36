"""An operator's relay history carries over: the real reference relay (`twist
transitrelay --usage-db`) records a pair, a lonely and an errory connection; then
`import-reference --transit-usage-db` and `export-usage --reference-transit-usage-db`
both give exactly its rows, with its row ids, and the two datasets agree."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from pigeonhole.cli.main import cli
from tests.support.reference import reference_database, sha256
from tests.transit.transit_support import Reference, line, side, token

pytestmark = pytest.mark.slow
PAYLOAD = 300_000
MOODS = {"happy", "lonely", "errory"}


async def _traffic(relay: Reference) -> None:
    """One happy pair (PAYLOAD bytes one way), one lonely, one errory connection (the
    relay also records its readiness probe's connection, as `empty`)."""
    tok = token()
    a, b = await relay.tcp(), await relay.tcp()
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert [await a.read(), await b.read()] == [b"ok\n", b"ok\n"]
    await a.send(b"x" * PAYLOAD)
    assert len(await b.read_exactly(PAYLOAD)) == PAYLOAD
    await a.close()
    await b.read_all(5)
    await b.close()
    lonely = await relay.tcp()
    await lonely.send(line(token(), side()))
    await lonely.shutdown_write()  # it leaves before a partner came: nothing came to it
    assert await lonely.read_all(5) == b""
    await lonely.close()
    errory = await relay.tcp()
    await errory.send(b"this is not a handshake\n")
    assert await errory.read_all(5) == b"bad handshake\n"
    await errory.close()


def _relay_rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT rowid, started, total_time, waiting_time, total_bytes, result"
            " FROM usage ORDER BY rowid"
        ).fetchall()


def _exported(root: Path) -> list[tuple[Any, ...]]:
    data = pads.dataset(root / "transit", partitioning="hive", format="parquet").to_table()
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    return [
        (r["id"], r["started"], r["total_time"], r["waiting_time"], r["total_bytes"], r["result"])
        for r in rows
    ]


async def test_the_reference_relays_history_imports_and_exports(tmp_path: Path) -> None:
    relay = Reference(tmp_path / "relay")
    try:
        await _traffic(relay)
        for _ in range(100):  # each record is committed when its connection ends
            if {r[5] for r in _relay_rows(relay.usage_db)} >= MOODS:
                break
            await asyncio.sleep(0.05)
    finally:
        relay.stop()
    recorded = _relay_rows(relay.usage_db)
    assert {r[5] for r in recorded} >= MOODS
    happy = next(r for r in recorded if r[5] == "happy")
    assert happy[4] == PAYLOAD and happy[3] is not None
    before = sha256(relay.usage_db)
    channel = reference_database(tmp_path / "relay.sqlite", "channel-v1.sql", 1)
    data = tmp_path / "pigeonhole"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["import-reference", "--channel-db", str(channel), "--data-dir", str(data),
         "--transit-usage-db", str(relay.usage_db)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"usage transit: {len(recorded)}" in result.output
    with sqlite3.connect(data / "usage.sqlite") as db:
        imported = db.execute(
            "SELECT id, started, total_time, waiting_time, total_bytes, result"
            " FROM transit ORDER BY id"
        ).fetchall()
    assert imported == recorded
    assert sha256(relay.usage_db) == before
    # one dataset from the relay's file, one from the imported data directory: the same
    from_relay, from_import = tmp_path / "from-relay", tmp_path / "from-import"
    for args in (
        ["--reference-transit-usage-db", str(relay.usage_db), "--out", str(from_relay)],
        ["--data-dir", str(data), "--out", str(from_import)],
    ):
        result = runner.invoke(cli, ["export-usage", *args])
        assert result.exit_code == 0, result.output
    assert _exported(from_relay) == _exported(from_import)
    assert [row[0] for row in _exported(from_relay)] == [row[0] for row in recorded]
