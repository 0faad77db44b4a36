"""A backup taken under load, restored elsewhere, resumes a waiting `wormhole send`.

A Python sender waits on the server (nameplate claimed, PAKE message posted). Meanwhile
WebSocket clients keep claiming, opening, adding and closing, and `pigeonhole backup`
copies the data directory while they commit. The server is then killed (SIGKILL, as a
machine that is lost), and a new server starts on the same port from the backup
directory: the sender reconnects to it by itself, a receiver comes with the code, and
the transfer completes.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest
import websockets

from tests.support.interop import Harness, check_success, senders_wait_through
from tests.support.interop_servers import Server
from tests.support.netns import Net
from tests.support.process import PIGEONHOLE
from tests.support.wormhole_clients import Codes

pytestmark = pytest.mark.interop

LOAD_WORKERS = 4
#: each worker stops after this many exchanges whatever happens
MAX_EXCHANGES = 5000


class Load:
    """WebSocket clients that claim, open, add and close in a loop, on a thread of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.done = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._names = itertools.count()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()))

    async def _run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(LOAD_WORKERS)))

    async def _worker(self) -> None:
        """One connection per exchange (the protocol allows one claim per connection)."""
        try:
            for _ in range(MAX_EXCHANGES):
                if self._stop.is_set():
                    return
                async with websockets.connect(self.url) as ws:
                    await self._exchange(ws, str(900_000 + next(self._names)))
                self.done += 1
        except BaseException as err:
            self.errors.append(err)

    async def _exchange(self, ws: websockets.ClientConnection, name: str) -> None:
        await self._call(ws, {"type": "bind", "appid": "load", "side": "a"}, None)
        claimed = await self._call(ws, {"type": "claim", "nameplate": name}, "claimed")
        mailbox = claimed["mailbox"]
        await self._call(ws, {"type": "open", "mailbox": mailbox}, None)
        add = {"type": "add", "phase": "pake", "body": "ab" * 32}
        await self._call(ws, add, "message")  # the echo: committed
        await self._call(ws, {"type": "release", "nameplate": name}, "released")
        await self._call(ws, {"type": "close", "mailbox": mailbox, "mood": "happy"}, "closed")

    @staticmethod
    async def _call(
        ws: websockets.ClientConnection, msg: dict[str, object], want: str | None
    ) -> dict[str, object]:
        await ws.send(orjson.dumps(msg).decode())
        while True:
            frame = orjson.loads(await ws.recv())
            if frame["type"] == "error":
                raise AssertionError(f"the server refused {msg}: {frame}")
            if (want is None and frame["type"] == "ack") or frame["type"] == want:
                return dict(frame)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def test_backup_under_load_resumes_a_waiting_sender(net: Net, codes: Codes, tmp_path: Path) -> None:
    server = Server(tmp_path / "data", tmp_path / "server.log")
    server.start()
    backup_dir = tmp_path / "elsewhere" / "backup"
    restored: list[Server] = []
    during: list[int] = []

    def backup_then_move() -> None:
        with Load(server.url) as load:
            deadline = time.monotonic() + 30
            while load.done < 20 and not load.errors and time.monotonic() < deadline:
                time.sleep(0.05)
            assert load.done >= 20, f"the load did not run: {load.errors}"
            before = load.done
            made = subprocess.run(
                [
                    *PIGEONHOLE,
                    "backup",
                    "--data-dir",
                    str(tmp_path / "data"),
                    "--out",
                    str(backup_dir),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            during.append(load.done - before)
        assert not load.errors, load.errors
        assert made.returncode == 0, made.stderr
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        moved = Server(backup_dir, tmp_path / "restored.log", port=server.port)
        restored.append(moved)
        moved.start()

    try:
        sender_side = Harness(net, server, tmp_path / "send", codes)
        receiver_side = Harness(net, server, tmp_path / "receive", codes)
        (result,) = senders_wait_through(
            sender_side, receiver_side, ["py"], backup_then_move, "backup"
        )
        check_success(result, restored[0] if restored else server)
    finally:
        server.stop(signal.SIGKILL)
        for moved in restored:
            moved.stop(signal.SIGKILL)
    print(f"# exchanges committed while the backup ran: {during}")
    resumed = re.search(r"resumed (\d+) nameplates, (\d+) mailboxes", restored[0].log_text())
    assert resumed and int(resumed[1]) >= 1 and int(resumed[2]) >= 1, restored[0].log_text()
