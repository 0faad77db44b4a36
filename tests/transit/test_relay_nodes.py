"""Transit pairs across `pigeonhole serve --store postgresql://...` nodes on one database.

Two serve processes share a fresh database (tests/support/postgres.py), each with its own
relay port. A side that reaches one node and its partner that reaches the other still
pair: the later one's node forwards it to the node where the first waits (the rows:
`channel.transit_waiting`). Then HAProxy (`mode tcp`, `balance roundrobin`) in front of
both relays, as tests/interop/test_nodes.py runs it for the mailbox: every pair through it
is relayed, whichever nodes its sides reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

import tests.support.process as process_support
from tests.support.postgres import fresh_database, run
from tests.support.process import ServeProcess, free_port
from tests.transit.transit_support import IMPATIENT, TcpClient, line, side, still_waiting, token

pytestmark = pytest.mark.slow

MIB = 1024 * 1024


class RelayNode(ServeProcess):
    """One serve node of the database, its relay on a free 127.0.0.1 port."""

    def __init__(self, name: str, workdir: Path, url: str, *extra: str) -> None:
        self.transit_port = free_port()
        data = workdir / f"{name}-data"
        data.mkdir(parents=True)
        super().__init__(
            workdir / f"{name}.log",
            *("--host", "127.0.0.1", "--data-dir", str(data), "--store", url),
            *("--admin-port", "0", "--transit-port", str(self.transit_port), *extra),
        )


#: a test's extra serve options for both nodes (`@pytest.mark.parametrize` indirect)
@pytest.fixture
def node_options() -> tuple[str, ...]:
    return ()


@pytest.fixture
def nodes(
    tmp_path: Path, node_options: tuple[str, ...]
) -> Iterator[tuple[RelayNode, RelayNode, str]]:
    with fresh_database(prefix="pigeonhole_transit_nodes") as url:
        one = RelayNode("node1", tmp_path, url, *node_options)
        two = RelayNode("node2", tmp_path, url, *node_options)
        try:
            one.start()
            two.start()
            yield one, two, url
        finally:
            for node in (one, two):
                node.stop(signal.SIGTERM)


def waiting_value(url: str, what: str) -> Any:
    """One value (`what`, an SQL expression) over the waiting rows, read in a fresh connection."""

    async def fetch() -> Any:
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetchval(f"SELECT {what} FROM channel.transit_waiting")
        finally:
            await conn.close()

    return run(fetch)


def waiting_rows(url: str) -> int:
    return int(waiting_value(url, "count(*)"))


async def rows_become(url: str, wanted: int, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if await asyncio.to_thread(waiting_rows, url) == wanted:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"channel.transit_waiting never had {wanted} rows")


async def both_ways(first: TcpClient, second: TcpClient, size: int) -> None:
    """`size` bytes each way at once, sha256 equal; then EOF from one reaches the other."""
    there, back = os.urandom(size), os.urandom(size)
    sends = [asyncio.create_task(c.send(d)) for c, d in ((first, there), (second, back))]
    got_back = await first.read_exactly(size, 60)
    got_there = await second.read_exactly(size, 60)
    await asyncio.gather(*sends)
    assert hashlib.sha256(got_there).digest() == hashlib.sha256(there).digest()
    assert hashlib.sha256(got_back).digest() == hashlib.sha256(back).digest()
    await first.close()
    assert await second.read_all(10) == b""
    await second.close()


async def test_sides_on_two_nodes_pair_and_move_four_mib_each_way(
    nodes: tuple[RelayNode, RelayNode, str],
) -> None:
    one, two, url = nodes
    tok = token()
    first = await TcpClient.open(one.transit_port)
    await first.send(line(tok, side()))
    await rows_become(url, 1)  # waiting on node 1, recorded for the others
    second = await TcpClient.open(two.transit_port)
    await second.send(line(tok, side()))
    assert await first.read(10) == b"ok\n"
    assert await second.read(10) == b"ok\n"
    await rows_become(url, 0)  # paired: the record is gone
    await both_ways(first, second, 4 * MIB)


async def test_the_same_side_on_two_nodes_never_pairs(
    nodes: tuple[RelayNode, RelayNode, str],
) -> None:
    one, two, url = nodes
    tok, sid = token(), side()
    first, second = await TcpClient.open(one.transit_port), await TcpClient.open(two.transit_port)
    await first.send(line(tok, sid))
    await rows_become(url, 1)
    await second.send(line(tok, sid))
    await rows_become(url, 2)
    assert await still_waiting(first) == IMPATIENT  # nothing came: each still waits
    assert await still_waiting(second) == IMPATIENT
    await rows_become(url, 0)  # each left: its record with it


HAPROXY_CFG = """\
defaults
    mode tcp
    timeout connect 2s
    timeout client 60s
    timeout server 60s

frontend relay
    bind 127.0.0.1:{port}
    default_backend relays

backend relays
    balance roundrobin
{servers}
"""


@contextlib.contextmanager
def haproxy(workdir: Path, ports: list[int]) -> Iterator[int]:
    """HAProxy round robin over the relays' ports; its own port."""
    binary = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")
    if binary is None:
        pytest.fail("haproxy is not installed (scripts/setup --test installs it)")
    port = free_port()
    servers = "\n".join(f"    server relay{i} 127.0.0.1:{p}" for i, p in enumerate(ports))
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(HAPROXY_CFG.format(port=port, servers=servers))
    with open(workdir / "haproxy.log", "wb") as log:
        proc = subprocess.Popen(
            [binary, "-f", str(cfg), "-db"], stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        for _ in range(200):
            if process_support.accepts_tcp(port):
                break
            time.sleep(0.05)
        yield port
    finally:
        process_support.stop(proc, signal.SIGTERM)


async def test_pairs_through_round_robin_are_all_relayed(
    nodes: tuple[RelayNode, RelayNode, str], tmp_path: Path
) -> None:
    one, two, url = nodes
    with haproxy(tmp_path, [one.transit_port, two.transit_port]) as port:
        for _ in range(6):  # round robin over two: each pair's sides reach both nodes
            tok = token()
            first = await TcpClient.open(port)
            await first.send(line(tok, side()))
            await rows_become(url, 1)
            second = await TcpClient.open(port)
            await second.send(line(tok, side()))
            assert await first.read(10) == b"ok\n"
            assert await second.read(10) == b"ok\n"
            await both_ways(first, second, 256 * 1024)
        await rows_become(url, 0)


def waiting_address(url: str) -> str:
    """The relay address of the one waiting row (`HOST:PORT`)."""
    return str(waiting_value(url, "address"))


@pytest.mark.parametrize("stopped", ["meeting", "forwarding"])
async def test_a_node_drains_a_cross_node_transfer_behind_round_robin(
    stopped: str, nodes: tuple[RelayNode, RelayNode, str], tmp_path: Path
) -> None:
    """A rolling restart: SIGTERM to either node of a pair whose sides reached different
    nodes through HAProxy; the node stops accepting, the transfer in flight ends whole
    (the link between the nodes included), and the node exits 0."""
    one, two, url = nodes
    with haproxy(tmp_path, [one.transit_port, two.transit_port]) as port:
        tok = token()
        first = await TcpClient.open(port)
        await first.send(line(tok, side()))
        await rows_become(url, 1)
        meeting_port = int((await asyncio.to_thread(waiting_address, url)).rpartition(":")[2])
        second = await TcpClient.open(port)
        await second.send(line(tok, side()))
        assert await first.read(10) == b"ok\n" and await second.read(10) == b"ok\n"
        meeting = one if one.transit_port == meeting_port else two
        forwarding = two if meeting is one else one
        assert {meeting, forwarding} == {one, two}  # round robin: the sides met across nodes
        node = meeting if stopped == "meeting" else forwarding
        data = os.urandom(4 * MIB)
        await first.send(data[:MIB])
        node.signal(signal.SIGTERM)
        for _ in range(50):  # it stops accepting at once
            if not await asyncio.to_thread(process_support.accepts_tcp, node.transit_port):
                break
            await asyncio.sleep(0.1)
        assert not await asyncio.to_thread(process_support.accepts_tcp, node.transit_port)
        for at in range(MIB, len(data), 256 * 1024):  # the pair keeps going meanwhile
            await first.send(data[at : at + 256 * 1024])
            await asyncio.sleep(0.05)
        await first.close()
        got = await second.read_all(30)
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), len(got)
        await second.close()
        assert await asyncio.to_thread(node.wait, 30) == 0, node.output()


@pytest.mark.parametrize("node_options", [("--transit-max-connections-per-address", "2")])
async def test_sides_forwarded_from_one_node_are_not_one_client(
    nodes: tuple[RelayNode, RelayNode, str],
) -> None:
    """Five pairs at once, each first side waiting on node 1 (from its own loopback
    address), each second side reaching node 2, which forwards it from 127.0.0.1: with
    two connections per address, node 1 still takes every link (each carries its
    waiter's ticket), and node 2's own clients keep their two slots."""
    one, two, url = nodes
    pairs = []
    for n in range(5):
        tok = token()
        first = await TcpClient.open(one.transit_port, source=f"127.0.0.{n + 2}")
        await first.send(line(tok, side()))
        await rows_become(url, 1)
        second = await TcpClient.open(two.transit_port, source=f"127.0.1.{n + 2}")
        await second.send(line(tok, side()))
        assert await first.read(10) == b"ok\n" and await second.read(10) == b"ok\n", n
        pairs.append((first, second))
    for first, second in pairs:  # all five at once, bytes both ways
        await both_ways(first, second, 64 * 1024)
    await rows_become(url, 0)
