"""A storage flood from one address is refused at its quota; real transfers carry on.

The server runs with its default limits: 64 MiB stored per client address. Two
attackers (X-Real-IP through the trusted loopback proxy) each try to store as much as they
can with 1 MiB bodies, one through connections in turn (each opening a fresh mailbox and
leaving without `close`, so per-connection limits reset every time), one through eight
connections at once. Meanwhile real `wormhole send` / `receive` pairs, from 127.0.0.1,
must all succeed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.abuse.abuse_support import get, metrics_url, running_server, transfer

pytestmark = pytest.mark.interop

MiB = 1024 * 1024
QUOTA = 64 * MiB  # the default --max-stored-bytes-per-address
BODY = "ab" * MiB
REFUSED = f"quota exceeded: bytes stored from your address ({QUOTA} bytes)"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    with running_server(tmp_path / "data") as running:
        yield running


async def _request(ws: Any, msg: dict[str, Any]) -> dict[str, Any]:
    await ws.send(json.dumps(msg))
    while True:
        reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if reply["type"] not in ("ack", "welcome"):
            return reply  # type: ignore[no-any-return]


async def _fill_one_mailbox(url: str, address: str) -> tuple[int, str]:
    """Bind, open a fresh mailbox, add 1 MiB bodies until refused; leave without close."""
    async with websockets.connect(
        url, additional_headers={"X-Real-IP": address}, max_size=None
    ) as ws:
        await ws.send(json.dumps({"type": "bind", "appid": "flood", "side": "s"}))
        mailbox = secrets.token_hex(6)
        await ws.send(json.dumps({"type": "open", "mailbox": mailbox}))
        stored = 0
        while True:
            reply = await _request(ws, {"type": "add", "phase": str(stored), "body": BODY})
            if reply["type"] == "error":
                # refused, not dropped: the connection still answers
                pong = await _request(ws, {"type": "ping", "ping": 1})
                assert pong == {**pong, "type": "pong", "pong": 1}
                return stored, reply["error"]
            assert reply["type"] == "message" and reply["phase"] == str(stored)
            stored += 1


async def sequential_flood(url: str, address: str) -> list[tuple[int, str]]:
    results = []
    for _ in range(10):  # 8 full mailboxes reach the quota; the rest are refused at once
        results.append(await _fill_one_mailbox(url, address))
    return results


async def parallel_flood(url: str, address: str) -> list[tuple[int, str]]:
    return list(await asyncio.gather(*(_fill_one_mailbox(url, address) for _ in range(10))))


def _gauge(metrics: str, name: str) -> int:
    return int(float(metrics.split(f"\n{name} ")[1].split()[0]))


async def test_a_storage_flood_is_refused_at_the_quota_while_real_transfers_succeed(
    server: tuple[str, int],
) -> None:
    url, _pid = server
    texts = [f"during-the-flood-{i}-{secrets.token_hex(4)}" for i in range(2)] + ["t" * 100_000]
    results = await asyncio.gather(
        sequential_flood(url, "203.0.113.66"),
        parallel_flood(url, "203.0.113.77"),
        *(transfer(url, text) for text in texts),
    )
    sequential, parallel = results[0], results[1]
    for flood in (sequential, parallel):
        assert sum(stored for stored, _ in flood) == QUOTA // MiB  # exactly, not a byte more
        refusals = {error for _, error in flood}
        assert REFUSED in refusals and refusals <= {REFUSED, "mailbox is full"}
    for text, result in zip(texts, results[2:], strict=True):
        send_rc, receive_rc, received = result
        assert (send_rc, receive_rc, received) == (0, 0, text)
    metrics = await asyncio.to_thread(get, metrics_url(url))
    stored = _gauge(metrics, "pigeonhole_stored_bytes")
    assert 2 * QUOTA <= stored < 2 * QUOTA + MiB  # the two floods, plus the real exchanges
    assert _gauge(metrics, "pigeonhole_body_cache_bytes") < MiB  # the bodies are not on the heap
    assert (
        'pigeonhole_limit_hits_total{limit="quota exceeded: bytes stored from your address"}'
        in metrics
    )
