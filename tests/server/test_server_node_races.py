"""Two `pigeonhole serve` processes on one PostgreSQL database, raced by many clients.

Both nodes allocate and claim the same nameplates at the same moment, many times: never
two mailboxes for one nameplate, never one nameplate allocated twice, and `crowded`
exactly when a third side comes. A node is killed with SIGKILL while a side waits on it,
and the side finishes on the other node with nothing lost. A quota per client address
counts what the address holds through every node.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from pigeonhole.protocol.errors import CROWDED
from tests.support.postgres import fresh_database
from tests.support.process import ServeProcess
from tests.support.server import Client, open_client

pytestmark = pytest.mark.slow

APP = "race.example/app"
ROUNDS = 12
#: nameplates raced at once in a round, each by three sides
AT_ONCE = 6
ALLOCATORS = 24


class Node(ServeProcess):
    """`python -m pigeonhole serve --store URL` on a free port, stopped by its PID."""

    def __init__(self, url: str, data_dir: Path) -> None:
        data_dir.mkdir(parents=True)
        super().__init__(
            data_dir.with_suffix(".log"),
            "--host", "127.0.0.1", "--admin-port", "0", "--data-dir", str(data_dir),
            "--store", url,
            ready_path="/health",
        )  # fmt: skip
        self.start(timeout=30)


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, Node, Node]]:
    with fresh_database() as url:
        one = Node(url, tmp_path / "one")
        try:
            two = Node(url, tmp_path / "two")
            try:
                yield url, one, two
            finally:
                two.stop()
        finally:
            one.stop()


async def _bound(node: Node, side: str, address: str = "") -> Client:
    """A client bound as `side`; from `address` (loopback is a trusted proxy) if given."""
    client = await open_client(node.url, {"X-Real-IP": address} if address else None)
    await client.bind(APP, side)
    return client


async def _race_one(name: str, nodes: list[Node]) -> tuple[set[str], int, int]:
    # each nameplate's sides from an address of their own: the per-address quotas (which
    # count across nodes: the last test) are not what is raced here
    address = f"198.51.100.{int(name) % 250}"
    clients = [await _bound(node, side, address) for node, side in zip(nodes, "abc", strict=True)]
    for client in clients:
        await client.send("claim", nameplate=name)
    replies = await asyncio.gather(*(c.next_non_ack() for c in clients))
    for client in clients:
        await client.disconnect()
    mailboxes = {r["mailbox"] for r in replies if r["type"] == "claimed"}
    claimed = sum(r["type"] == "claimed" for r in replies)
    crowded = sum(r["type"] == "error" and r["error"] == CROWDED for r in replies)
    return mailboxes, claimed, crowded


async def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(sql)]
    finally:
        await conn.close()


async def test_racing_claims_and_allocations_across_two_processes(two_nodes) -> None:
    url, one, two = two_nodes
    for round_ in range(ROUNDS):
        # the third side alternates between the nodes
        third = one if round_ % 2 else two
        names = [str(1000 + round_ * AT_ONCE + i) for i in range(AT_ONCE)]
        results = await asyncio.gather(*(_race_one(n, [one, two, third]) for n in names))
        for mailboxes, claimed, crowded in results:
            assert len(mailboxes) == 1 and claimed == 2 and crowded == 1, results
    rows = await _rows(url, "SELECT app_id, name, mailbox_id FROM channel.nameplates")
    assert len(rows) == ROUNDS * AT_ONCE
    sides = await _rows(url, "SELECT count(*) FROM channel.nameplate_sides GROUP BY name")
    assert {n for (n,) in sides} == {3}  # the crowded side's claim is recorded, as on SQLite

    # allocations from both nodes at once never hand out one nameplate twice
    allocators = [
        await _bound(one if i % 2 else two, f"s{i}", f"203.0.113.{i}") for i in range(ALLOCATORS)
    ]
    for client in allocators:
        await client.send("allocate")
    replies = await asyncio.gather(*(c.next_non_ack() for c in allocators))
    names = [r["nameplate"] for r in replies]
    assert all(r["type"] == "allocated" for r in replies), replies
    assert len(set(names)) == ALLOCATORS
    for client, name in zip(allocators, names, strict=True):
        await client.send("claim", nameplate=name)
    claims = await asyncio.gather(*(c.next_non_ack() for c in allocators))
    assert len({c["mailbox"] for c in claims}) == ALLOCATORS
    for client in allocators:
        await client.disconnect()


async def test_a_waiting_side_survives_kill_9_of_its_node(two_nodes) -> None:
    url, one, two = two_nodes
    a = await _bound(one, "a")
    mailbox = await a.claim("77")
    await a.open(mailbox)
    echo = await a.add("pake", "a1a1", msg_id="p1")  # confirmed: it must survive
    assert one.stop(signal.SIGKILL) == -signal.SIGKILL
    # side b arrives on the surviving node, and side a comes back there too
    b = await _bound(two, "b")
    assert await b.claim("77") == mailbox
    replay = await b.open(mailbox)
    assert [(f["side"], f["body"], f["id"]) for f in replay] == [("a", "a1a1", "p1")]
    again = await _bound(two, "a")
    assert await again.claim("77") == mailbox
    replay = await again.open(mailbox)
    assert [(f["side"], f["body"]) for f in replay] == [("a", "a1a1")]
    assert replay[0]["server_rx"] == echo["server_rx"]
    await b.add("pake", "b1b1")
    got = await again.next_non_ack()
    assert (got["side"], got["body"]) == ("b", "b1b1")
    for side in (again, b):
        await side.release()
        await side.close(mood="happy")
    rows = await _rows(url, "SELECT result FROM usage.mailboxes")
    assert rows == [("happy",)]


async def test_a_quota_per_address_counts_across_nodes(two_nodes) -> None:
    _, one, two = two_nodes
    held = []
    for i in range(32):  # the default: 32 nameplates held per address
        client = await _bound(one if i % 2 else two, f"q{i}", "192.0.2.7")
        await client.claim(str(500 + i))
        held.append(client)
    for node in (one, two):
        late = await _bound(node, "late", "192.0.2.7")
        reply = await late.call("claim", nameplate="599")
        assert reply["error"] == "quota exceeded: nameplates held by your address (32)"
        other = await _bound(node, "other", "192.0.2.8")  # another address is not held back
        assert await other.claim(f"6{node.port % 100:02d}")
    await held[0].release()  # a release anywhere gives room on every node
    again = await _bound(one, "late", "192.0.2.7")
    assert await again.claim("599")
