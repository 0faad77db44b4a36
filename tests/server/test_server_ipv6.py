"""A real IPv6 listener: clients over IPv6 loopback are counted by their /64.

The server listens on `::1`, then on `::` (every IPv4 and IPv6 address); its clients
connect over `[::1]` (and 127.0.0.1 on `::`), with no proxy header: the TCP peer is the
address. Its refusals are counted, on the status page, under the client's prefix.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
import websockets

from pigeonhole.protocol.limits import Limits
from pigeonhole.server.app import MailboxServer
from tests.support.server import APPID, http_get, open_client

NAMEPLATES = "quota exceeded: nameplates held by your address"


@pytest.fixture(autouse=True)
def _ipv6_loopback() -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")


def v6_url(srv: MailboxServer) -> str:
    return f"ws://[::1]:{srv.port}/v1"


async def status(srv: MailboxServer) -> dict[str, Any]:
    code, _, body = await http_get(f"http://127.0.0.1:{srv.admin_port}/status.json")
    assert code == 200
    return json.loads(body)  # type: ignore[no-any-return]


async def test_ipv6_clients_are_refused_by_prefix(make_server: Any) -> None:
    limits = Limits(max_nameplates_per_address=1)
    async with make_server(host="::1", max_connections_per_address=2, limits=limits) as srv:
        first = await open_client(v6_url(srv))
        assert first.welcome["your-address"]["ipv6"] == "::1"
        await first.bind(APPID, "a")
        assert (await first.call("allocate"))["type"] == "allocated"
        second = await open_client(v6_url(srv))
        await second.bind(APPID, "b")
        refused = await second.call("allocate")
        assert refused["type"] == "error" and refused["error"].startswith(NAMEPLATES)
        with pytest.raises(websockets.InvalidStatus) as third:
            await open_client(v6_url(srv))
        assert third.value.response.status_code == 429
        body = await status(srv)
        assert dict(map(tuple, body["addresses"]["connections"])) == {"::/64": 2}
        assert body["hour"]["limits"]["connections per address"] == 1
        for client in (first, second):
            await client.disconnect()


async def test_dual_stack_counts_ipv4_and_ipv6_apart(make_server: Any) -> None:
    async with make_server(host="::", max_connections_per_address=1) as srv:
        v6 = await open_client(v6_url(srv))
        v4 = await open_client(f"ws://127.0.0.1:{srv.port}/v1")
        assert v4.welcome["your-address"]["ipv4"] == "127.0.0.1"
        with pytest.raises(websockets.InvalidStatus) as refused:
            await open_client(v6_url(srv))
        assert refused.value.response.status_code == 429
        busiest = dict(map(tuple, (await status(srv))["addresses"]["connections"]))
        assert busiest == {"::/64": 1, "127.0.0.1": 1}
        for client in (v6, v4):
            await client.disconnect()
