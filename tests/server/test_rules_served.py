"""Deny and notice rules at every door of a running server (`--deny-file`): the mailbox,
the WebSocket and TCP relays and the archive; IPv4, IPv6 prefixes and single IPv6
addresses, the address a trusted proxy reports and the TCP peer's own."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.server.status_support import status
from tests.support.server import APPID, http_get, open_client

pytestmark = pytest.mark.asyncio

RULES = """\
# tests/server/test_rules_served.py
deny 203.0.113.0/24 Your network sent too much: write to abuse@example.org
deny 2001:db8:1:2::/64 That /64 is blocked
deny 2001:db8:9::5 Only this address is blocked
notice 198.51.100.7 Please slow down
notice 2001:db8:7::/48 Your client is old
"""


def rules_file(tmp_path: Path, text: str = RULES) -> Path:
    path = tmp_path / "deny.txt"
    path.write_text(text)
    return path


def behind_proxy(address: str) -> dict[str, str]:
    """Headers of the trusted proxy on loopback saying who the client is."""
    return {"X-Real-IP": address}


async def denied_welcome(url: str, address: str) -> tuple[dict[str, Any], int, str]:
    """Connect as `address` (through the loopback proxy), send commands at once; the
    welcome and the close code and reason that follow it."""
    async with connect(url, additional_headers=behind_proxy(address), proxy=None) as ws:
        welcome = json.loads(await asyncio.wait_for(ws.recv(), 5))
        for msg in ({"type": "bind", "appid": APPID, "side": "x"}, {"type": "allocate"}):
            try:
                await ws.send(json.dumps(msg))
            except ConnectionClosed:
                break
        with pytest.raises(ConnectionClosed):
            while True:
                frame = await asyncio.wait_for(ws.recv(), 5)
                raise AssertionError(f"a denied client got {frame!r}")
        assert ws.close_code is not None
        return welcome, ws.close_code, ws.close_reason or ""


async def test_the_mailbox_refuses_with_the_reason_and_notices_in_the_motd(
    make_server: Any, tmp_path: Path
) -> None:
    async with make_server(deny_file=rules_file(tmp_path), motd="Be kind") as srv:
        url = f"ws://127.0.0.1:{srv.port}/v1"
        cases = [
            ("203.0.113.9", "Your network sent too much: write to abuse@example.org"),
            ("2001:db8:1:2:aaaa::1", "That /64 is blocked"),
            ("2001:db8:9::5", "Only this address is blocked"),
        ]
        for address, reason in cases:
            welcome, code, said = await denied_welcome(url, address)
            assert welcome["type"] == "welcome" and welcome["welcome"]["error"] == reason
            assert "motd" not in welcome["welcome"]
            assert (code, said) == (1008, reason)
        # the same /64's neighbour and the blocked address's neighbour are served
        for address in ("2001:db8:1:3::1", "2001:db8:9::6", "203.0.114.1"):
            served = await open_client(url, headers=behind_proxy(address))
            assert "error" not in served.welcome and served.welcome["motd"] == "Be kind"
            await served.bind(APPID, "a")
            await served.disconnect()
        noticed = await open_client(url, headers=behind_proxy("198.51.100.7"))
        assert noticed.welcome["motd"] == "Please slow down\n\nBe kind"
        assert "error" not in noticed.welcome
        await noticed.bind(APPID, "a")
        assert (await noticed.call("allocate"))["type"] == "allocated"
        await noticed.disconnect()
        v6 = await open_client(url, headers=behind_proxy("2001:db8:7:1::3"))
        assert v6.welcome["motd"] == "Your client is old\n\nBe kind"
        await v6.disconnect()
        figures = (await status(srv))["figures"]
        assert figures["pigeonhole_denied_by_rule_total"] == {"mailbox": 3}
        assert figures["pigeonhole_notices_sent_total"] == 2
        assert figures["pigeonhole_rules"] == {"deny": 3, "notice": 2}
        # nothing the denied clients sent was acted on: one nameplate, the noticed one's
        assert figures["pigeonhole_commands_total"].get("allocate") == 1
        _, _, metrics = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
        assert 'pigeonhole_denied_by_rule_total{door="mailbox"} 3.0' in metrics
        assert "pigeonhole_notices_sent_total 2.0" in metrics


async def test_a_notice_without_a_configured_motd_is_the_motd(
    make_server: Any, tmp_path: Path
) -> None:
    async with make_server(deny_file=rules_file(tmp_path)) as srv:
        url = f"ws://127.0.0.1:{srv.port}/v1"
        noticed = await open_client(url, headers=behind_proxy("198.51.100.7"))
        assert noticed.welcome["motd"] == "Please slow down"
        await noticed.disconnect()
        plain = await open_client(url)
        assert "motd" not in plain.welcome
        await plain.disconnect()


async def test_the_websocket_relay_closes_a_denied_client_1008_with_the_reason(
    make_server: Any, tmp_path: Path
) -> None:
    async with make_server(deny_file=rules_file(tmp_path)) as srv:
        url = f"ws://127.0.0.1:{srv.port}/transit"
        for address, reason in (
            ("203.0.113.200", "Your network sent too much: write to abuse@example.org"),
            ("2001:db8:1:2::77", "That /64 is blocked"),
        ):
            ws = await connect(url, additional_headers=behind_proxy(address), proxy=None)
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, reason)
        served = await connect(url, additional_headers=behind_proxy("2001:db8:1:3::77"), proxy=None)
        await served.send(b"please relay " + b"0" * 64 + b" for side " + b"1" * 16 + b"\n")
        await served.close()
        figures = (await status(srv))["figures"]
        assert figures["pigeonhole_denied_by_rule_total"] == {"websocket relay": 2}


async def test_the_archive_refuses_a_denied_client_with_403_and_the_reason(
    make_server: Any, tmp_path: Path
) -> None:
    async with make_server(deny_file=rules_file(tmp_path)) as srv:
        url = f"ws://127.0.0.1:{srv.port}/whisper/v6"
        with pytest.raises(websockets.InvalidStatus) as refused:
            await connect(url, additional_headers=behind_proxy("2001:db8:9::5"), proxy=None)
        response = refused.value.response
        assert response.status_code == 403
        assert response.body is not None and response.body.decode() == (
            "Only this address is blocked\n"
        )
        served = await connect(url, additional_headers=behind_proxy("2001:db8:9::6"), proxy=None)
        await served.close()
        figures = (await status(srv))["figures"]
        assert figures["pigeonhole_denied_by_rule_total"] == {"archive": 1}


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
async def test_the_tcp_relay_and_the_mailbox_refuse_the_peer_itself(
    make_server: Any, tmp_path: Path, family: str
) -> None:
    """No proxy: the TCP peer is the address (127.0.0.1, or ::1 on an IPv6 listener)."""
    if family == "ipv6" and not _ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    host, rule = ("127.0.0.1", "127.0.0.0/8") if family == "ipv4" else ("::1", "::1")
    rules = rules_file(tmp_path, f"deny {rule} Loopback is blocked here\n")
    async with make_server(host=host, deny_file=rules) as srv:
        assert srv.ctx.transit is not None and srv.ctx.transit.port is not None
        reader, writer = await asyncio.open_connection(host, srv.ctx.transit.port)
        writer.write(b"please relay " + b"0" * 64 + b"\n")
        assert await asyncio.wait_for(reader.read(100), 5) == b""  # closed, nothing said
        writer.close()
        shown = f"[{host}]" if ":" in host else host
        welcome, code, _ = await denied_welcome(f"ws://{shown}:{srv.port}/v1", host)
        assert welcome["welcome"]["error"] == "Loopback is blocked here" and code == 1008
        figures = (await status(srv))["figures"]
        assert figures["pigeonhole_denied_by_rule_total"] == {"tcp relay": 1, "mailbox": 1}
