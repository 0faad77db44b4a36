"""`pigeonhole serve --store postgresql://...` with the real clients, on a real PostgreSQL.

One node on a fresh database (tests/support/postgres.py): real transfers with the `wormhole`
CLI and wormhole-william, text and a file; a Python sender waiting while the node is
killed with SIGKILL, restarted on the same database, and the receiver then finishing; and
`export-usage --store` giving exactly the database's usage rows. Several nodes on one
database: tests/interop/test_nodes.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.support.interop import Harness, PairResult, check_success
from tests.support.interop_servers import Server, wait_for_pake
from tests.support.netns import Net
from tests.support.postgres import fresh_database, run
from tests.support.wormhole_clients import WORMHOLE_WILLIAM, Codes, random_file, random_text

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def usage_rows(url: str, table: str) -> list[tuple[object, ...]]:
    async def fetch() -> list[tuple[object, ...]]:
        conn = await asyncpg.connect(url)
        try:
            rows = await conn.fetch(f"SELECT id, result FROM usage.{table} ORDER BY id")
            return [tuple(r) for r in rows]
        finally:
            await conn.close()

    return run(fetch)


def test_one_node_on_postgresql(net: Net, codes: Codes, tmp_path: Path) -> None:
    with fresh_database() as url:
        server = Server(tmp_path / "data", tmp_path / "server.log", args=["--store", url])
        server.start()
        try:
            harness = Harness(net, server, tmp_path / "clients", codes)
            harness.transfer("py", "py", random_text(), "pg-py-py")
            if WORMHOLE_WILLIAM:
                harness.transfer("ww", "py", random_text(), "pg-ww-py")
                harness.transfer("py", "ww", random_file(tmp_path / "files"), "pg-py-ww-file")
            harness.transfer("py", "py", random_file(tmp_path / "files"), "pg-py-py-file")

            # SIGKILL while a sender waits: nothing it was told is lost
            code, payload = codes.next(), random_text()
            sender = harness.start("py", "send", code, payload, "pg-restart")
            sender.wait_code()
            wait_for_pake(server, [code])  # it waits: claimed, open, PAKE stored
            assert sender.returncode is None, sender.describe()
            assert server.stop(signal.SIGKILL) == -signal.SIGKILL
            server.start()
            receiver = harness.start("py", "receive", code, payload, "pg-restart")
            sender.wait()
            receiver.wait()
            check_success(PairResult(sender, receiver, code, payload), server)
        finally:
            server.stop(signal.SIGTERM)

        mailboxes = usage_rows(url, "mailboxes")
        assert len(mailboxes) >= 3 and {r for _, r in mailboxes} == {"happy"}
        out = tmp_path / "dataset"
        done = subprocess.run(
            [sys.executable, "-m", "pigeonhole", "export-usage", "--store", url, "--out", str(out)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        exported = pads.dataset(out / "mailboxes", format="parquet", partitioning="hive")
        got = sorted((r["id"], r["result"]) for r in exported.to_table().to_pylist())
        assert got == mailboxes
