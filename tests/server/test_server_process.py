"""The real `pigeonhole serve` process: durability across SIGKILL, clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.process import ServeProcess, gone, parent
from tests.support.server import APPID, Client, http_get, open_client, strip

pytestmark = pytest.mark.asyncio


def serve_process_in(
    tmp_path: Path, commit_sync: str = "process", peer_delivery: str = "immediate"
) -> ServeProcess:
    """`python -m pigeonhole serve` on 127.0.0.1 with its data in tmp_path/data and no
    PIGEONHOLE_* setting from the environment (the relay and admin ports free ones, so a
    server already on 4001 or 4080 does not stop it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIGEONHOLE")}
    return ServeProcess(
        tmp_path / "serve.log",
        "--host",
        "127.0.0.1",
        "--transit-port",
        "0",
        "--admin-port",
        "0",
        "--data-dir",
        str(tmp_path / "data"),
        "--commit-sync",
        commit_sync,
        "--peer-delivery",
        peer_delivery,
        env=env,
    )


async def start(process: ServeProcess) -> None:
    """Start it (off the event loop) until GET / answers the relay's banner."""
    await asyncio.to_thread(process.start)
    status, _, body = await http_get(f"http://127.0.0.1:{process.port}/")
    assert (status, body) == (200, "Wormhole Relay\n")


async def wait(process: ServeProcess) -> int:
    """Its exit status (off the event loop)."""
    return await asyncio.to_thread(process.wait)


@pytest.fixture(
    params=[("process", "immediate"), ("thread", "immediate"), ("loop", "durable")],
    ids=lambda p: "-".join(p),
)
def serve_process(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServeProcess]:
    """A (not yet started) server process, for each place the logs can be synced from (and
    each peer-delivery mode); killed at teardown if still running."""
    process = serve_process_in(tmp_path, *request.param)
    yield process
    process.stop(signal.SIGKILL)


async def bound_client(url: str, side: str, clients: list[Client]) -> Client:
    client = await open_client(url)
    clients.append(client)
    await client.bind(APPID, side, client_version=["test", "1"])
    return client


async def test_sigkill_loses_nothing_confirmed(serve_process):
    """Every confirmed claim, open and message survives SIGKILL and a restart."""
    await start(serve_process)
    url = serve_process.url
    clients: list[Client] = []
    channels = []  # (nameplate, mailbox, [messages in order])
    for i in range(4):
        name = str(20 + i)
        a = await bound_client(url, f"a{i}", clients)
        mailbox = await a.claim(name)
        assert await a.open(mailbox) == []
        sent = [await a.add("pake", f"{i:02x}aa", f"a{i}-1")]
        sent.append(await a.add("version", f"{i:02x}bb", {"n": i}))
        b = await bound_client(url, f"b{i}", clients)
        assert await b.claim(name) == mailbox
        assert [strip(m) for m in await b.open(mailbox)] == [strip(m) for m in sent]
        sent.append(await b.add("pake", f"{i:02x}cc", None))
        channels.append((name, mailbox, sent))
    allocator = await bound_client(url, "alloc", clients)
    allocated = (await allocator.call("allocate"))["nameplate"]
    allocated_mailbox = await allocator.claim(allocated)
    bare = await bound_client(url, "bare", clients)
    assert await bare.open("bare-mailbox") == []
    bare_sent = [await bare.add("0", "0123")]

    serve_process.signal(signal.SIGKILL)
    assert await wait(serve_process) == -signal.SIGKILL
    for client in clients:
        await client.disconnect()
    clients.clear()

    await start(serve_process)
    try:
        for i, (name, mailbox, sent) in enumerate(channels):
            for side in (f"a{i}", f"b{i}"):
                again = await bound_client(url, side, clients)
                assert await again.claim(name) == mailbox
                history = await again.open(mailbox)
                assert [strip(m) for m in history] == [strip(m) for m in sent]
                assert [m["server_rx"] for m in history] == [m["server_rx"] for m in sent]
            crowd = await bound_client(url, f"c{i}", clients)
            await crowd.expect_error("crowded", "claim", nameplate=name)
        again = await bound_client(url, "alloc", clients)
        assert await again.claim(allocated) == allocated_mailbox
        again = await bound_client(url, "bare", clients)
        assert [strip(m) for m in await again.open("bare-mailbox")] == [strip(m) for m in bare_sent]
        names = (await again.call("list"))["nameplates"]
        expected = sorted([name for name, _, _ in channels] + [allocated])
        assert names == [{"id": n} for n in expected]
    finally:
        for client in clients:
            await client.disconnect()


async def test_sigterm_closes_with_1001_and_exits_zero(serve_process):
    """SIGTERM closes every WebSocket with 1001 and exits 0; the data is kept."""
    await start(serve_process)
    clients: list[Client] = []
    a = await bound_client(serve_process.url, "a", clients)
    mailbox = await a.claim("5")
    assert await a.open(mailbox) == []
    echo = await a.add("p", "aa")
    idle = await open_client(serve_process.url)  # connected, not bound
    clients.append(idle)

    serve_process.signal(signal.SIGTERM)
    for client in clients:
        await asyncio.wait_for(client.ws.wait_closed(), 10)
        assert client.ws.close_code == 1001
    assert await wait(serve_process) == 0

    await start(serve_process)
    again = await bound_client(serve_process.url, "a", clients)
    assert await again.claim("5") == mailbox
    assert [strip(m) for m in await again.open(mailbox)] == [strip(echo)]
    await again.disconnect()


def store_helpers_of(pid: int) -> list[int]:
    """PIDs of the store helper processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        if parent(int(entry)) != pid:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if b"pigeonhole.store.sqlite.helper_main" in cmdline:
            found.append(int(entry))
    return found


async def test_a_killed_server_leaves_no_store_helper_behind(tmp_path: Path) -> None:
    """The helper ends when the server's end of its pipe closes, even on SIGKILL."""
    process = serve_process_in(tmp_path)
    try:
        await start(process)
        assert process.proc is not None
        helpers = store_helpers_of(process.proc.pid)
        assert len(helpers) == 1
        clients: list[Client] = []
        a = await bound_client(process.url, "a", clients)
        await a.claim("7")  # a confirmed claim: the helper has written and synced
        process.signal(signal.SIGKILL)
        assert await wait(process) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while not gone(helpers[0]):
            assert time.monotonic() < deadline, "the store helper outlived its server"
            await asyncio.sleep(0.05)
        for client in clients:
            await client.disconnect()
    finally:
        process.stop(signal.SIGKILL)
