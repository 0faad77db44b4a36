"""End to end: the real server, real wormhole transfers, export-usage, report, the figures.

Three transfers through `pigeonhole serve` on loopback: one happy (`wormhole send` and
`receive` with the same code), one scary (the receiver types a wrong code), and one lonely
(a client that claims, opens and gives up, spoken over the WebSocket protocol directly, as
the CLI has no give-up switch). The usage database is exported while the server still runs,
and the report's tables must show exactly what happened.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads  # type: ignore[import-untyped, unused-ignore]
import pytest
from click.testing import CliRunner

from pigeonhole.cli.usage import export_usage, report
from tests.support.process import ServeProcess

pytestmark = pytest.mark.interop
APP = "lothar.com/wormhole/text-or-file-xfer"
WORMHOLE = Path(sys.executable).with_name("wormhole")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """`pigeonhole serve` on a free loopback port, ready (GET / answers)."""
    if not WORMHOLE.exists():
        pytest.skip("the wormhole CLI (magic-wormhole) is not installed")
    data = tmp_path / "server"
    process = ServeProcess(
        tmp_path / "server.log",
        "--host",
        "127.0.0.1",
        "--data-dir",
        str(data),
        "--usage-sample-interval",
        "0.2",
    )
    process.start(timeout=30)
    yield process.port, data
    process.stop()


def _wormhole(port: int, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(WORMHOLE), "--relay-url", f"ws://127.0.0.1:{port}/v1", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _transfer(port: int, code: str, receiver_code: str) -> tuple[str, str]:
    """The receiver's output and the sender's; the sender claims first, as a person would
    (it prints its code once it is connected and has set it)."""
    sender = _wormhole(port, "send", "--no-qr", "--code", code, "--text", "pigeon")
    said: list[str] = []
    shown = threading.Event()

    def read() -> None:
        assert sender.stdout is not None
        try:
            for text in sender.stdout:
                said.append(text)
                if "Wormhole code is" in text:
                    shown.set()
        finally:
            shown.set()  # it exited without one: the assertion below says so

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    shown.wait(60)
    assert "Wormhole code is" in "".join(said), "".join(said)
    receiver = _wormhole(port, "receive", receiver_code)
    received = receiver.communicate(timeout=60)[0]
    sender.wait(60)
    reader.join(10)
    return received, "".join(said)


def _lonely(port: int) -> None:
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{port}/v1") as ws:

        def call(message: dict[str, Any], answer: str) -> dict[str, Any]:
            ws.send(json.dumps(message))
            while True:
                reply = json.loads(ws.recv(timeout=10))
                if reply["type"] == answer:
                    return reply  # type: ignore[no-any-return]

        ws.recv(timeout=10)  # welcome
        ws.send(
            json.dumps(
                {
                    "type": "bind",
                    "appid": APP,
                    "side": "a1b2c3d4e5",
                    "client_version": ["python", "0.24.0"],
                }
            )
        )
        mailbox = call({"type": "claim", "nameplate": "99"}, "claimed")["mailbox"]
        call({"type": "open", "mailbox": mailbox}, "ack")
        call({"type": "release", "nameplate": "99"}, "released")
        call({"type": "close", "mailbox": mailbox, "mood": "lonely"}, "closed")


def _wait_for_mailboxes(db: Path, count: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            found = con.execute("SELECT count(*) FROM mailboxes").fetchone()[0]
        finally:
            con.close()
        if found >= count:
            return
        assert time.monotonic() < deadline, f"only {found} mailbox rows"
        time.sleep(0.2)


def _table(out: Path, name: str) -> list[dict[str, Any]]:
    rows = pads.dataset(out / "tables" / name, format="parquet", partitioning="hive")
    return rows.to_table().to_pylist()  # type: ignore[no-any-return]


def test_real_transfers_show_up_in_the_report(
    spark: Any, server: tuple[int, Path], tmp_path: Path
) -> None:
    """happy + scary + lonely through the server -> exactly those in the report's tables."""
    port, data = server
    received, _ = _transfer(port, "7-guitarist-revenge", "7-guitarist-revenge")
    assert "pigeon" in received
    wrong, _ = _transfer(port, "8-crossover-clockwork", "8-crossover-clockword")
    assert "pigeon" not in wrong
    _lonely(port)
    _wait_for_mailboxes(data / "usage.sqlite", 3)
    dataset, out = tmp_path / "dataset", tmp_path / "report"
    exported = CliRunner().invoke(export_usage, ["--data-dir", str(data), "--out", str(dataset)])
    assert exported.exit_code == 0, exported.output
    made = CliRunner().invoke(report, ["--input", str(dataset), "--output", str(out), "--quiet"])
    assert made.exit_code == 0, made.output

    results = {(r["app_id"], r["result"]): r["count"] for r in _table(out, "daily_results")}
    assert results == {(APP, "happy"): 1, (APP, "scary"): 1, (APP, "lonely"): 1}
    plates = {
        (r["app_id"], r["result"]): r["count"] for r in _table(out, "daily_nameplate_results")
    }
    assert plates.get((APP, "lonely")) == 1 and plates.get((APP, "happy"), 0) >= 1
    summary = [r for r in _table(out, "daily_summary") if r["app_id"] is None]
    assert sum(r["finished"] for r in summary) == 3
    assert max(r["peak_mailboxes"] for r in summary) >= 1
    clients = _table(out, "daily_clients")
    assert sum(r["binds"] for r in clients if r["implementation"] == "python") >= 5
    assert sum(r["samples"] for r in _table(out, "hourly_connections")) >= 1
