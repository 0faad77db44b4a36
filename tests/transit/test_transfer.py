"""Bytes through the relay: every TCP/WebSocket combination, EOF, many pairs at once."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pigeonhole.transit import Mood, TransitConfig, pipes
from tests.transit.transit_support import Client, Relay, TcpClient, line, side, token

MIB = 1024 * 1024
KINDS = ["tcp", "ws"]


async def connect(relay: Relay, kind: str) -> Client:
    return await (relay.tcp() if kind == "tcp" else relay.ws())


async def pair(relay: Relay, sender: str, receiver: str) -> tuple[Client, Client]:
    tok = token()
    a, b = await connect(relay, sender), await connect(relay, receiver)
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert await a.read(5) == b"ok\n"
    assert await b.read(5) == b"ok\n"
    return a, b


async def send_and_close(client: Client, data: bytes, chunk: int = 64 * 1024) -> None:
    for start in range(0, len(data), chunk):
        await client.send(data[start : start + chunk])
    await client.close()


async def transfer(relay: Relay, sender: str, receiver: str, size: int) -> bytes:
    """`size` random bytes from a `sender` client to a `receiver` one; what arrived."""
    a, b = await pair(relay, sender, receiver)
    data = os.urandom(size)
    sending = asyncio.create_task(send_and_close(a, data))
    got = await b.read_all(60)
    await sending
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), (len(got), size)
    return got


@pytest.mark.parametrize("sender", KINDS)
@pytest.mark.parametrize("receiver", KINDS)
async def test_one_mib_and_eof_in_every_combination(sender: str, receiver: str) -> None:
    async with Relay(TransitConfig()) as relay:
        await transfer(relay, sender, receiver, MIB)
        await relay.settle()
        assert [r.result for r in relay.records] == [Mood.HAPPY]
        assert relay.records[0].total_bytes == MIB
        assert not relay.relay.hub.live


async def test_tcp_pairs_without_splice_move_the_same_bytes() -> None:
    async with Relay(TransitConfig(), splice=False) as relay:
        await transfer(relay, "tcp", "tcp", 4 * MIB)


@pytest.mark.parametrize("receiver", KINDS)
async def test_both_directions_at_once(relay: Relay, receiver: str) -> None:
    a, b = await pair(relay, "tcp", receiver)
    there, back = os.urandom(3 * MIB), os.urandom(2 * MIB)
    sends = [asyncio.create_task(c.send(d)) for c, d in ((a, there), (b, back))]
    got_back = await a.read_exactly(len(back), 30)
    got_there = await b.read_exactly(len(there), 30)
    await asyncio.gather(*sends)
    assert (got_there, got_back) == (there, back)


@pytest.mark.slow
@pytest.mark.parametrize(("sender", "receiver"), [("tcp", "tcp"), ("ws", "ws"), ("ws", "tcp")])
async def test_fifty_pairs_at_once_lose_no_byte(sender: str, receiver: str) -> None:
    async with Relay(TransitConfig()) as relay:
        sizes = [200_000 + 7919 * i for i in range(50)]
        await asyncio.gather(*(transfer(relay, sender, receiver, size) for size in sizes))
        await relay.settle()
        assert sorted(r.total_bytes for r in relay.records) == sorted(sizes)
        assert {r.result for r in relay.records} == {Mood.HAPPY}


async def test_a_pair_without_descriptors_for_pipes_copies_through_python(relay: Relay) -> None:
    """Out of file descriptors when a pair meets and moves: no pipe can be made, so each
    move copies a slice through Python; every byte still flows."""
    tok = token()
    a, b = await relay.tcp(), await relay.tcp()
    await a.send(line(tok, side()))
    await relay.connections(2)  # both accepted: no descriptor is needed from here on
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now, hard))
    try:
        await b.send(line(tok, side()))
        assert (await a.read(5), await b.read(5)) == (b"ok\n", b"ok\n")
        data = os.urandom(2 * MIB)
        sending = asyncio.create_task(a.send(data))
        assert await b.read_exactly(len(data), 30) == data
        await sending
        assert relay.relay.hub.pipes.created == 0  # no pipe was ever had
        await a.close()
        assert await b.read_all(10) == b""
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(("sender", "receiver"), [("tcp", "ws"), ("ws", "tcp"), ("tcp", "tcp")])
async def test_a_slow_receiver_gets_every_byte_after_the_sender_left(
    sender: str, receiver: str
) -> None:
    """The sender closes at once; the receiver reads slowly for longer than close_timeout."""
    async with Relay(TransitConfig(close_timeout=0.5, pair_buffer_bytes=256 * 1024)) as relay:
        a, b = await pair(relay, sender, receiver)
        if isinstance(b, TcpClient):
            b.read_size = 128 * 1024
        data = os.urandom(2 * MIB)
        sending = asyncio.create_task(send_and_close(a, data))
        started, got = time.monotonic(), b""
        while True:
            await asyncio.sleep(0.1)
            chunk = await b.read(5)
            assert chunk is not None, f"stalled after {len(got)} bytes"
            if not chunk:
                break
            got += chunk[:]
        await sending
        assert len(got) == len(data) and got == data
        assert time.monotonic() - started > 1.0  # twice close_timeout at least


class PeakPages(pipes.PipePages):
    """The pump's page account, remembering its highest count."""

    def __init__(self, limit: int | None) -> None:
        super().__init__(limit)
        self.peak = 0

    def take(self, pages: int, needed: bool = False) -> bool:
        granted = super().take(pages, needed)
        self.peak = max(self.peak, self.used)
        return granted


@pytest.mark.parametrize("limit", [None, 48], ids=["no-limit", "tight-limit"])
async def test_splice_pipes_are_as_large_as_the_page_account_allows_and_come_back(
    monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    """A lent pipe is made at the direction's bound (1 MiB) when pages are free, no
    larger than the account allows under a tight one; every byte goes either way, and
    the pages come back when the relay stops."""
    pages = PeakPages(limit)
    monkeypatch.setattr(pipes, "pipe_pages", lambda: pages)
    async with Relay(TransitConfig()) as relay:
        await transfer(relay, "tcp", "tcp", 16 * MIB)
        await relay.settle()
    if limit is None:
        assert pages.peak >= TransitConfig().direction_buffer_bytes // pipes.PAGE
    else:
        assert 64 * 1024 // pipes.PAGE <= pages.peak <= limit
    assert pages.used == 0


async def test_pairs_one_after_another_reuse_the_same_pipes() -> None:
    """A flow gives its pipe back once it is empty: ten pairs, one after another, are
    served by the pipes the first one made (two at most: one per direction)."""
    async with Relay(TransitConfig()) as relay:
        for _ in range(10):
            await transfer(relay, "tcp", "tcp", 1 * MIB)
        await relay.settle()
        assert 1 <= relay.relay.hub.pipes.created <= 2


async def test_many_fast_pairs_at_once_need_few_pipes() -> None:
    """Thirty pairs at once whose receivers keep up: pipes hold bytes only between the
    two splices of a move, so far fewer than the sixty a pipe per direction would take."""
    async with Relay(TransitConfig()) as relay:
        await asyncio.gather(*(transfer(relay, "tcp", "tcp", 4 * MIB) for _ in range(30)))
        await relay.settle()
        assert {r.result for r in relay.records} == {Mood.HAPPY}
        assert relay.relay.hub.pipes.created < 60


def test_an_unprivileged_relay_asks_for_no_pipe_above_the_system_limit() -> None:
    """Without CAP_SYS_RESOURCE a pipe may not exceed `fs.pipe-max-size` (asking more
    fails and leaves the default 64 KiB): a pool for a larger bound makes pipes of the
    largest size allowed. Run as a user of its own with no capabilities (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a process as another user")
    max_size = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    code = (
        "from pigeonhole.transit.pipes import PipePool; "
        f"print(PipePool({4 * max_size}).borrow().capacity)"
    )
    out = subprocess.run(
        ["setpriv", "--reuid=61998", "--regid=61998", "--clear-groups", "--inh-caps=-all",
         "--bounding-set=-all", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, check=True, cwd="/",
    ).stdout  # fmt: skip
    assert int(out) == max_size
