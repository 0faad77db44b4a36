"""Quotas that outlive a connection: stored bytes, nameplates and mailboxes per address.

Real servers on 127.0.0.1, real WebSocket clients; each "address" is set with X-Real-IP
through the trusted loopback proxy, as behind nginx.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from pigeonhole.archive.client import ArchiveClient
from pigeonhole.archive.envelopes import seal
from pigeonhole.protocol.limits import Limits
from tests.limits.limits_support import StartServer, call, connect
from tests.support.server import http_get

ATTACKER = "203.0.113.66"
OTHER = "198.51.100.20"
KiB = 1024


async def client(url: str, address: str, side: str = "s") -> Any:
    ws = await connect(url, additional_headers={"X-Real-IP": address})
    await ws.send(json.dumps({"type": "bind", "appid": "app", "side": side}))
    return ws


async def opened(url: str, address: str, mailbox: str, side: str = "s") -> Any:
    ws = await client(url, address, side)
    await ws.send(json.dumps({"type": "open", "mailbox": mailbox}))
    return ws


async def fill(ws: Any, body_bytes: int, most: int = 100) -> tuple[int, dict[str, Any] | None]:
    """Add bodies until refused (or `most` stored): (bodies stored, the refusal)."""
    body = "ab" * body_bytes
    for stored in range(most):
        reply = await call(ws, type="add", phase=str(stored), body=body)
        if reply["type"] == "error":
            return stored, reply
        assert reply["type"] == "message", reply
    return most, None


async def alive(ws: Any) -> bool:
    return (await call(ws, type="ping", ping="still here"))["pong"] == "still here"


async def test_stored_bytes_per_address_hold_across_reconnects(start_server: StartServer) -> None:
    limits = Limits(
        max_body_bytes=32 * KiB,
        max_mailbox_bytes=64 * KiB,
        max_stored_bytes_per_address=160 * KiB,
    )
    async with start_server(limits=limits) as srv:
        stored = 0
        refusals = []
        for i in range(4):  # each connection: a fresh mailbox, filled, left without close
            ws = await opened(srv.url, ATTACKER, f"flood-{i}")
            n, refusal = await fill(ws, 32 * KiB)
            assert refusal is not None
            stored += n
            refusals.append(refusal["error"])
            assert await alive(ws)  # refused, not dropped
            await ws.close()
        assert stored == 5  # 160 KiB of 32 KiB bodies, however many connections
        assert refusals[:2] == ["mailbox is full", "mailbox is full"]
        quota = f"quota exceeded: bytes stored from your address ({160 * KiB} bytes)"
        assert refusals[2:] == [quota, quota]
        assert srv.ctx.ledger.bytes_by[ATTACKER] == 160 * KiB
        # another address is not touched by it
        other = await opened(srv.url, OTHER, "fine")
        reply = await call(other, type="add", phase="0", body="cd" * 32 * KiB)
        assert reply["type"] == "message"
        metrics = srv.ctx.metrics.limits
        assert metrics["quota exceeded: bytes stored from your address"] == 2


async def test_parallel_connections_share_one_quota(start_server: StartServer) -> None:
    limits = Limits(max_body_bytes=16 * KiB, max_stored_bytes_per_address=256 * KiB)
    async with start_server(limits=limits) as srv:
        conns = [await opened(srv.url, ATTACKER, f"p-{i}") for i in range(8)]
        results = await asyncio.gather(*(fill(ws, 16 * KiB) for ws in conns))
        assert sum(n for n, _ in results) == 16  # exactly the quota, shared by all eight
        refusals = [r for _, r in results if r is not None]
        assert len(refusals) == 8
        assert all("bytes stored from your address" in r["error"] for r in refusals)
        assert all(r["orig"]["type"] == "add" for r in refusals)
        assert srv.ctx.ledger.bytes_by[ATTACKER] == 256 * KiB
        for ws in conns:
            assert await alive(ws)


async def test_closing_the_mailbox_gives_the_quota_back(start_server: StartServer) -> None:
    limits = Limits(max_body_bytes=16 * KiB, max_stored_bytes_per_address=32 * KiB)
    async with start_server(limits=limits) as srv:
        ws = await opened(srv.url, ATTACKER, "m")
        assert (await fill(ws, 16 * KiB))[0] == 2
        assert (await call(ws, type="close", mood="happy"))["type"] == "closed"
        assert ATTACKER not in srv.ctx.ledger.bytes_by and srv.ctx.ledger.stored_bytes == 0
        again = await opened(srv.url, ATTACKER, "m2")
        assert (await fill(again, 16 * KiB))[0] == 2


async def test_the_server_total_is_bounded(start_server: StartServer) -> None:
    limits = Limits(max_body_bytes=16 * KiB, max_stored_bytes=64 * KiB)
    async with start_server(limits=limits) as srv:
        first = await opened(srv.url, ATTACKER, "a")
        second = await opened(srv.url, OTHER, "b")
        n1, _ = await fill(first, 16 * KiB, most=3)
        n2, refusal = await fill(second, 16 * KiB)
        assert (n1, n2) == (3, 1) and refusal is not None
        assert refusal["error"] == f"quota exceeded: bytes stored on this server ({64 * KiB} bytes)"
        assert srv.ctx.ledger.stored_bytes == 64 * KiB


async def test_nameplate_squatting_across_reconnects_is_refused(
    start_server: StartServer,
) -> None:
    limits = Limits(max_nameplates_per_address=3)
    async with start_server(limits=limits) as srv:
        names = []
        for _ in range(3):  # one allocate per connection, then away
            ws = await client(srv.url, ATTACKER)
            reply = await call(ws, type="allocate")
            assert reply["type"] == "allocated", reply
            names.append(reply["nameplate"])
            await ws.close()
        squatter = await client(srv.url, ATTACKER)
        quota = "quota exceeded: nameplates held by your address (3)"
        reply = await call(squatter, type="allocate")
        assert reply["type"] == "error" and reply["error"] == quota
        assert reply["orig"] == {"type": "allocate"}
        reply = await call(squatter, type="claim", nameplate="99")
        assert reply["error"] == quota
        assert await alive(squatter)
        # joining someone else's nameplate creates nothing: allowed
        victim = await client(srv.url, OTHER, side="v")
        theirs = await call(victim, type="allocate")
        joined = await call(squatter, type="claim", nameplate=theirs["nameplate"])
        assert joined["type"] == "claimed", joined
        listed = await call(victim, type="list")
        assert {n["id"] for n in listed["nameplates"]} == {*names, theirs["nameplate"]}
    # the quota survives a restart: the rows carry their owner
    async with start_server(limits=limits) as again:
        ws = await client(again.url, ATTACKER)
        assert (await call(ws, type="allocate"))["error"] == quota
        other = await client(again.url, OTHER, side="w")
        assert (await call(other, type="allocate"))["type"] == "allocated"


async def test_mailboxes_per_address(start_server: StartServer) -> None:
    async with start_server(limits=Limits(max_mailboxes_per_address=2)) as srv:
        for name in ("x", "y"):
            ws = await opened(srv.url, ATTACKER, name)
            assert await alive(ws)
            await ws.close()
        ws = await client(srv.url, ATTACKER)
        reply = await call(ws, type="open", mailbox="z")
        assert reply["error"] == "quota exceeded: mailboxes held by your address (2)"
        assert reply["orig"] == {"type": "open", "mailbox": "z"}
        # opening one that exists creates nothing
        again = await client(srv.url, ATTACKER, side="t")
        await again.send(json.dumps({"type": "open", "mailbox": "x"}))
        assert await alive(again)
        assert srv.ctx.ledger.mailboxes_by[ATTACKER] == 2


async def test_refusals_are_logged_once_per_interval_with_a_count(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pigeonhole")
    limits = Limits(max_body_bytes=1024, max_stored_bytes_per_address=1024)
    async with start_server(limits=limits, log_summary_interval=3600) as srv:
        ws = await opened(srv.url, ATTACKER, "m")
        assert (await call(ws, type="add", phase="0", body="ab" * 1024))["type"] == "message"
        for i in range(50):
            reply = await call(ws, type="add", phase=str(i + 1), body="ab")
            assert "bytes stored from your address" in reply["error"]
        lines = [
            r.getMessage() for r in caplog.records if "stored from your address" in r.getMessage()
        ]
        assert len(lines) == 1 and "refused" in lines[0] and ATTACKER in lines[0]
        srv.ctx.events.summary.flush()
    summary = [r.getMessage() for r in caplog.records if "49 more in the last" in r.getMessage()]
    assert len(summary) == 1 and summary[0].startswith("quota exceeded: bytes stored")


async def test_below_the_disk_watermark_only_small_bodies_are_stored(
    start_server: StartServer,
) -> None:
    """A watermark above any real free space: the low-disk state, without filling a disk."""
    async with start_server(disk_free_watermark=1 << 62, disk_check_interval=0.05) as srv:
        status, _, text = await http_get(f"http://127.0.0.1:{srv.port}/health")
        assert status == 503 and text.startswith("disk space low:")
        sender = await opened(srv.url, OTHER, "m", side="a")
        reply = await call(sender, type="add", phase="0", body="ab" * 20_000)
        assert reply["error"] == (
            "server is low on disk space: only small messages are stored now (20000 > 16384 bytes)"
        )
        assert reply["orig"]["phase"] == "0"
        # a real exchange's messages are small: stored and delivered
        small = await call(sender, type="add", phase="pake", body="cd" * 200)
        assert small["type"] == "message"
        receiver = await opened(srv.url, ATTACKER, "m", side="b")
        replayed = await call(receiver, type="ping", ping=1)
        assert (replayed["type"], replayed["body"]) == ("message", "cd" * 200)
        while (frame := json.loads(await receiver.recv()))["type"] == "ack":
            pass
        assert frame["type"] == "pong"
        assert (await call(receiver, type="close", mood="happy"))["type"] == "closed"
        # the archive refuses new envelopes in its receipt
        envelope = seal(
            expiry=int(time.time()) + 100, ttl=100, topic=b"\1\2\3\4", data=b"x", target_pow=0.002
        )
        async with ArchiveClient.connect(f"ws://127.0.0.1:{srv.port}/whisper/v6") as archive:
            refused = await archive.post([envelope])
        assert [(e.hash, e.description) for e in refused] == [
            (envelope.hash, "server is low on disk space: nothing is archived now")
        ]
        _, _, metrics = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
        assert "pigeonhole_disk_low 1.0\n" in metrics
        assert 'pigeonhole_limit_hits_total{limit="server is low on disk space' in metrics
