"""The real `wormhole` CLI (magic-wormhole) sends a file through Pigeonhole's relay.

Both sides run with `--no-listen` (no direct hints) and name our relay as their transit
helper, so the file can only go through it; each side also connects once for its peer's
hint (the same relay, the same side), which must not pair with itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pigeonhole.transit import Mood, TransitConfig
from tests.transit.transit_support import Relay, free_port

BIN = Path(sys.executable).parent
CODE = "7-guitarist-revenge"


async def start_mailbox(tmp_path: Path) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pigeonhole", "serve", "--host", "127.0.0.1",
        "--port", str(port), "--data-dir", str(tmp_path / "data"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError):
            await asyncio.to_thread(urllib.request.urlopen, f"http://127.0.0.1:{port}/", None, 2)
            return proc, f"ws://127.0.0.1:{port}/v1"
        assert time.monotonic() < deadline, "the mailbox did not start"
        await asyncio.sleep(0.1)


async def wormhole(
    mailbox: str, relay_port: int, *args: str, code_shown: asyncio.Event | None = None
) -> tuple[int, str]:
    """Runs the CLI to its end: its status and output; `code_shown` is set once it has
    printed its code (connected to the mailbox, the code set)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "wormhole"), "--relay-url", mailbox,
        "--transit-helper", f"tcp:127.0.0.1:{relay_port}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    said: list[bytes] = []

    async def read(stdout: asyncio.StreamReader) -> None:
        async for text in stdout:
            said.append(text)
            if code_shown is not None and b"Wormhole code is" in text:
                code_shown.set()
        await proc.wait()

    try:
        await asyncio.wait_for(read(proc.stdout), 90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, b"".join(said).decode(errors="replace")


@pytest.mark.interop
async def test_wormhole_cli_sends_a_file_through_the_relay(tmp_path: Path) -> None:
    if not (BIN / "wormhole").exists():
        pytest.skip("the wormhole CLI is not installed (scripts/setup --test does it)")
    source = tmp_path / "payload.bin"
    source.write_bytes(os.urandom(5 * 1024 * 1024 + 17))
    target = tmp_path / "received.bin"
    mailbox_proc, mailbox = await start_mailbox(tmp_path)
    try:
        async with Relay(TransitConfig()) as relay:
            shown = asyncio.Event()
            send = asyncio.create_task(
                wormhole(mailbox, relay.port, "send", "--no-listen", "--hide-progress",
                         "--code", CODE, str(source), code_shown=shown)
            )  # fmt: skip
            # the sender claims first: the receiver starts once it has printed its code
            waiting = asyncio.create_task(shown.wait())
            await asyncio.wait([waiting, send], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            assert shown.is_set(), await send if send.done() else "no code in 60 s"
            received = await wormhole(
                mailbox, relay.port, "receive", "--no-listen", "--hide-progress",
                "--accept-file", "-o", str(target), CODE,
            )  # fmt: skip
            sent = await send
            assert sent[0] == 0 and received[0] == 0, (sent, received)
            assert "relay" in sent[1], sent[1]  # "Sending (->relay:tcp:127.0.0.1:PORT)"
            await relay.settle(10)
            happy = [r for r in relay.records if r.result is Mood.HAPPY]
            assert len(happy) == 1 and happy[0].total_bytes > source.stat().st_size
    finally:
        mailbox_proc.terminate()
        await mailbox_proc.wait()
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert digest == hashlib.sha256(source.read_bytes()).hexdigest()
