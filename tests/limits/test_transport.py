"""TLS, trusted proxies, the welcome's advertisements, /metrics and /health."""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from pathlib import Path

import pytest
import trustme

from tests.limits.limits_support import StartServer, call, connect


async def test_wss_with_a_verifying_client(start_server: StartServer, tmp_path: Path) -> None:
    """wss:// works for a client that verifies the certificate against a test CA."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    async with start_server(tls_cert=cert_path, tls_key=key_path) as srv:
        assert srv.url.startswith("wss://")
        verifying = ssl.create_default_context()
        ca.configure_trust(verifying)
        ws = await connect(srv.url, ssl=verifying)
        assert (await call(ws, type="ping", ping=3))["pong"] == 3
        # a client that does not trust the CA refuses the server
        with pytest.raises(ssl.SSLCertVerificationError):
            await connect(srv.url, ssl=ssl.create_default_context())


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            {"X-Real-IP": "203.0.113.5", "X-Real-Port": "4444"},
            {"ipv4": "203.0.113.5", "port": 4444},
        ),
        ({"X-Real-IP": "2001:db8::1"}, {"ipv6": "2001:db8::1"}),
        ({"X-Forwarded-For": "198.51.100.9, 127.0.0.1"}, {"ipv4": "198.51.100.9"}),
    ],
)
async def test_trusted_proxy_headers_are_honoured(
    start_server: StartServer, headers: dict[str, str], expected: dict[str, object]
) -> None:
    """From a trusted (loopback) proxy, X-Real-IP/Port and X-Forwarded-For give the address."""
    async with start_server() as srv:
        ws = await connect(srv.url, additional_headers=headers)
        assert ws.welcome["your-address"] == expected


async def test_untrusted_peer_cannot_spoof_its_address(start_server: StartServer) -> None:
    """When loopback is not a trusted proxy, the headers are ignored: the peer is used."""
    async with start_server(trusted_proxies=("10.0.0.0/8",), max_connections_per_address=1) as srv:
        ws = await connect(srv.url, additional_headers={"X-Real-IP": "203.0.113.5"})
        assert ws.welcome["your-address"]["ipv4"] == "127.0.0.1"
        # and a spoofed header does not escape the per-address limit
        with pytest.raises(Exception, match="429"):
            await connect(srv.url, additional_headers={"X-Real-IP": "203.0.113.6"})


async def test_welcome_advertises_permissions_and_disabled_list(start_server: StartServer) -> None:
    """The welcome lists permission methods, and says when `list` is disabled."""
    async with start_server(disallow_list=True, permissions=("none", "hashcash")) as srv:
        ws = await connect(srv.url)
        required = ws.welcome["permission-required"]
        assert required["none"] == {}
        assert required["hashcash"]["bits"] == 20
        assert ":" not in required["hashcash"]["resource"]
        assert ws.welcome["list-disabled"] is True
        other = await connect(srv.url)
        assert (
            other.welcome["permission-required"]["hashcash"]["resource"]
            != (required["hashcash"]["resource"])
        )


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


async def test_metrics_and_health(start_server: StartServer) -> None:
    """/metrics counts commands, errors and live objects; /health checks the database."""
    async with start_server() as srv:
        ws = await connect(srv.url)
        await ws.send('{"type": "bind", "appid": "a", "side": "s"}')
        await call(ws, type="claim", nameplate="5")
        await call(ws, type="claim", nameplate="6")  # only one claim per connection
        base = f"http://127.0.0.1:{srv.port}"
        admin = f"http://127.0.0.1:{srv.admin_port}"
        status, body = await asyncio.to_thread(_get, admin + "/metrics")
        assert status == 200
        assert 'pigeonhole_commands_total{type="claim"} 2' in body
        assert 'pigeonhole_errors_total{error="only one claim per connection"} 1' in body
        assert "pigeonhole_nameplates 1" in body and "pigeonhole_mailboxes 1" in body
        assert "pigeonhole_commit_latency_seconds_count" in body
        assert await asyncio.to_thread(_get, base + "/health") == (200, "ok\n")
