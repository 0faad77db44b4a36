"""Shared by the import and export tests: clients on the reference, the CLI, SQLite reads."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pigeonhole.cli.main import cli
from tests.support.reference import ReferenceServer
from tests.support.server import APPID, Client, open_client

OTHER_APP = "example.com/other-app"
pytestmark = pytest.mark.slow


async def bound(url: str, side: str, app: str = APPID) -> Client:
    client = await open_client(url)
    await client.bind(app, side)
    return client


async def on_reference(url: str) -> dict[str, Any]:
    """What clients did and saw on the reference; everyone disconnects at the end."""
    seen: dict[str, Any] = {}
    a = await bound(url, "side-a")
    seen["mailbox"] = await a.claim("7")
    assert await a.open(seen["mailbox"]) == []
    seen["echoes"] = [
        await a.add("pake", "00ab" * 8, msg_id="i1"),
        await a.add("version", "ABCD", msg_id="i2"),  # capitals: must come back verbatim
        await a.add("0", "", msg_id=None),
    ]
    lonely = await bound(url, "side-b")
    seen["lonely_mailbox"] = await lonely.claim("8")
    crowd = [await bound(url, side) for side in ("x", "y", "z")]
    seen["crowded_mailbox"] = await crowd[0].claim("9")
    await crowd[1].claim("9")
    await crowd[2].expect_error("crowded", "claim", nameplate="9")
    bare = await bound(url, "side-c", OTHER_APP)
    await bare.open("bare-mailbox-1")
    seen["bare_echo"] = await bare.add("0", "ff00", msg_id="c1")
    # one exchange that finishes on the reference: usage rows
    d, e = await bound(url, "side-d"), await bound(url, "side-e")
    done = await d.claim("10")
    await e.claim("10")
    await d.open(done)
    await e.open(done)
    await d.release()
    await e.release()
    await d.close(mailbox=done, mood="happy")
    await e.close(mailbox=done, mood="happy")
    listing = await a.call("list")
    seen["nameplates"] = sorted(n["id"] for n in listing["nameplates"])
    for client in (a, lonely, *crowd, bare, d, e):
        await client.disconnect()
    return seen


def run_import(*args: str) -> Any:
    return CliRunner().invoke(cli, ["import-reference", *args], catch_exceptions=False)


def import_files(channel_db: Path, usage_db: Path, data_dir: Path) -> Any:
    """`import-reference` of both databases into DATA_DIR, which must succeed."""
    result = run_import(
        "--channel-db", str(channel_db), "--usage-db", str(usage_db), "--data-dir", str(data_dir)
    )
    assert result.exit_code == 0, result.output
    return result


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[ReferenceServer]:
    """The reference server on a free loopback port, its databases under tmp_path."""
    ref = ReferenceServer(tmp_path / "reference")
    ref.start()
    yield ref
    ref.stop()
