"""The relay as `pigeonhole serve` hosts it: TCP on the transit port, WebSocket at /transit.

Real servers (in the test's loop, and one `pigeonhole serve` process for SIGTERM), real
TCP and WebSocket clients on loopback. TCP and WebSocket connections meet in one pairing
table; clients are counted by the server's rule (an IPv6 client is its /64); `--no-transit`
serves neither; on SIGTERM no new relay connection is taken while an active pair finishes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import websockets

from pigeonhole.config import ServerConfig
from pigeonhole.server.app import MailboxServer
from tests.support.process import ServeProcess, accepts_tcp, free_port
from tests.transit.transit_support import Client, TcpClient, WsClient, line, side, token

MIB = 1024 * 1024
Start = Callable[..., Any]


@pytest.fixture
def start(tmp_path: Path) -> Start:
    @asynccontextmanager
    async def run(**overrides: Any) -> AsyncIterator[MailboxServer]:
        config = ServerConfig(
            host="127.0.0.1", port=0, admin_port=0, transit_port=0, data_dir=tmp_path / "data"
        )
        async with MailboxServer(replace(config, **overrides)) as server:
            yield server

    return run


def ws_url(server: MailboxServer) -> str:
    return f"ws://127.0.0.1:{server.port}/transit"


async def open_client(server: MailboxServer, kind: str, **headers: str) -> Client:
    if kind == "tcp":
        assert server.ctx.transit is not None and server.ctx.transit.port
        return await TcpClient.open(server.ctx.transit.port)
    return await WsClient.open(ws_url(server), headers or None)


async def relay_through(server: MailboxServer, sender: str, receiver: str, size: int) -> None:
    tok = token()
    a, b = await open_client(server, sender), await open_client(server, receiver)
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert await a.read(5) == b"ok\n" and await b.read(5) == b"ok\n"
    data = os.urandom(size)

    async def send() -> None:
        for at in range(0, size, 64 * 1024):
            await a.send(data[at : at + 64 * 1024])
        await a.close()

    sending = asyncio.create_task(send())
    got = await b.read_all(60)
    await sending
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), (len(got), size)


@pytest.mark.parametrize(("sender", "receiver"), [("tcp", "tcp"), ("ws", "tcp"), ("tcp", "ws")])
async def test_serve_relays_tcp_and_websocket(start: Start, sender: str, receiver: str) -> None:
    async with start() as server:
        await relay_through(server, sender, receiver, MIB)
        stats = server.ctx.transit.stats()
        assert stats["bytes_relayed"] >= MIB
        # the mailbox on the same port still answers
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/v1") as mailbox:
            assert json.loads(await mailbox.recv())["type"] == "welcome"


async def test_websocket_clients_are_counted_by_prefix(start: Start) -> None:
    async with start(transit_max_connections_per_address=2) as server:
        held = [await open_client(server, "ws", **{"X-Real-IP": f"2001:db8:5:6::{n}"})
                for n in (1, 2)]  # fmt: skip
        refused = await open_client(server, "ws", **{"X-Real-IP": "2001:db8:5:6::3"})
        assert await refused.read(5) == b""  # closed at once
        assert isinstance(refused, WsClient) and refused.ws.close_code == 1013
        other = await open_client(server, "ws", **{"X-Real-IP": "2001:db8:5:7::1"})
        partner = await open_client(server, "ws", **{"X-Real-IP": "2001:db8:5:8::1"})
        tok = token()
        await other.send(line(tok, side()))
        await partner.send(line(tok, side()))
        assert (await other.read(5), await partner.read(5)) == (b"ok\n", b"ok\n")  # taken
        assert server.ctx.transit.stats()["refusals"]
        for client in (*held, other, partner):
            await client.close()


async def test_no_transit_serves_no_relay(start: Start) -> None:
    async with start(transit=False) as server:
        assert server.ctx.transit is None
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(ws_url(server))
        assert refused.value.response.status_code == 404


def test_sigterm_drains_an_active_pair(tmp_path: Path) -> None:
    """SIGTERM: new relay connections are refused, the pair in flight finishes whole."""
    transit_port = free_port()
    server = ServeProcess(
        tmp_path / "serve.log",
        "--data-dir",
        str(tmp_path / "data"),
        "--transit-port",
        str(transit_port),
        "--transit-drain-timeout",
        "20",
    )
    with server:
        asyncio.run(_drain_scenario(server, transit_port))
        assert server.wait(30) == 0, server.output()


async def _drain_scenario(server: ServeProcess, transit_port: int) -> None:
    tok = token()
    a, b = await TcpClient.open(transit_port), await TcpClient.open(transit_port)
    await a.send(line(tok, side()))
    await b.send(line(tok, side()))
    assert await a.read(5) == b"ok\n" and await b.read(5) == b"ok\n"
    data = os.urandom(4 * MIB)
    await a.send(data[:MIB])
    server.signal(signal.SIGTERM)
    for _ in range(50):  # the relay stops accepting at once
        if not await asyncio.to_thread(accepts_tcp, transit_port):
            break
        await asyncio.sleep(0.1)
    assert not await asyncio.to_thread(accepts_tcp, transit_port)
    for at in range(MIB, len(data), 256 * 1024):  # the pair keeps going during the drain
        await a.send(data[at : at + 256 * 1024])
        await asyncio.sleep(0.1)
    await a.close()
    got = await b.read_all(30)
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), len(got)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


async def test_metrics_and_status_show_the_relay(start: Start) -> None:
    async with start() as server:
        await relay_through(server, "tcp", "ws", MIB)
        lonely = await open_client(server, "tcp")
        await lonely.send(line(token(), side()))
        admin = f"http://127.0.0.1:{server.admin_port}"
        for _ in range(50):  # the pair's end is noted once both sides are closed
            metrics = await asyncio.to_thread(_get, f"{admin}/metrics")
            happy = 'pigeonhole_transit_connections_ended_total{mood="happy"} 1' in metrics
            if happy and "pigeonhole_transit_waiting 1" in metrics:
                break
            await asyncio.sleep(0.1)
        assert 'pigeonhole_transit_connections_ended_total{mood="happy"} 1' in metrics
        assert "pigeonhole_transit_waiting 1" in metrics
        relayed = int(
            float(metrics.split("\npigeonhole_transit_bytes_relayed_total ")[1].split()[0])
        )
        assert relayed >= MIB
        status = json.loads(await asyncio.to_thread(_get, f"{admin}/status.json"))
        transit = status["transit"]
        assert (transit["port"], transit["waiting"]) == (server.ctx.transit.port, 1)
        assert transit["hour"]["moods"]["happy"] == 1
        assert transit["hour"]["bytes"] >= MIB
        await lonely.close()


async def test_usage_records_are_committed_to_the_usage_database(
    start: Start, tmp_path: Path
) -> None:
    async with start() as server:
        await relay_through(server, "ws", "tcp", MIB)
        lonely = await open_client(server, "tcp")
        await lonely.send(line(token(), side()))
        assert isinstance(lonely, TcpClient)
        await lonely.shutdown_write()  # it leaves before a partner came: nothing came to it
        assert await lonely.read_all(5) == b""
        await lonely.close()
        for _ in range(50):
            if server.ctx.transit.stats()["moods"].get("lonely"):
                break
            await asyncio.sleep(0.1)
    with sqlite3.connect(tmp_path / "data" / "usage.sqlite") as db:
        rows = db.execute("SELECT result, total_bytes FROM transit ORDER BY result").fetchall()
    assert [r[0] for r in rows] == ["happy", "lonely"]
    assert rows[0][1] == MIB
