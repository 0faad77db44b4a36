"""One client, one bound: an IPv6 /64 (or the operator's prefix) is one client address.

Real servers on each store, real WebSocket clients; each client "address" is set with
X-Real-IP through the trusted loopback proxy, as a proxy in front would. Many addresses
of one /64 share one quota of nameplates, stored bytes and connections; an address of
another /64 is unaffected; `ipv6_prefix=48` widens the group; IPv4 and IPv4-mapped IPv6
count as before; a restart rebuilds the counts by prefix. The welcome still tells each
client its real address.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import websockets

from pigeonhole.clients import client_key
from pigeonhole.protocol.limits import Limits
from pigeonhole.server.app import MailboxServer
from tests.support.server import APPID, Client, http_get, open_client

NAMEPLATES = "quota exceeded: nameplates held by your address"
BYTES = "quota exceeded: bytes stored from your address"
#: five addresses of one /64, and one of the /64 next to it (same /48)
ONE_64 = [f"2001:db8:1:2::{n:x}" for n in (1, 2, 0xBEEF, 0xFFFF, 0x1234)]
NEXT_64 = "2001:db8:1:3::1"
OTHER_48 = "2001:db8:2:2::1"


async def client_at(srv: MailboxServer, address: str) -> Client:
    client = await open_client(srv.url, {"X-Real-IP": address})
    await client.bind(APPID, "side-" + address.replace(":", "").replace(".", "")[-8:])
    return client


async def allocate(srv: MailboxServer, address: str) -> dict[str, Any]:
    """One `allocate` from a fresh connection at `address` (per-connection limits reset)."""
    client = await client_at(srv, address)
    try:
        return await client.call("allocate")
    finally:
        await client.disconnect()


def test_the_rule() -> None:
    assert client_key("2001:db8:1:2::beef") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:2:aaaa::1", 48) == "2001:db8:1::/48"
    assert client_key("2001:db8:1:2::beef", 128) == "2001:db8:1:2::beef"
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("192.0.2.7") == "192.0.2.7"
    # a stored key is regrouped, never narrowed
    assert client_key("2001:db8:1:2::/64", 48) == "2001:db8:1::/48"
    assert client_key("2001:db8:1::/48", 64) == "2001:db8:1::/48"
    assert client_key("not-an-address") == "not-an-address"
    assert client_key("") == ""  # nobody's (a row stored under --blur-usage) stays nobody's


async def test_one_64_shares_one_nameplate_quota(make_server: Any) -> None:
    async with make_server(limits=Limits(max_nameplates_per_address=3)) as srv:
        replies = [await allocate(srv, a) for a in ONE_64[:4]]
        assert [r["type"] for r in replies] == ["allocated"] * 3 + ["error"]
        assert replies[3]["error"].startswith(NAMEPLATES)
        # the /64 next door, and another /48, are other clients
        assert (await allocate(srv, NEXT_64))["type"] == "allocated"
        assert (await allocate(srv, OTHER_48))["type"] == "allocated"


async def test_prefix_48_widens_the_group(make_server: Any) -> None:
    limits = Limits(max_nameplates_per_address=2)
    async with make_server(limits=limits, ipv6_prefix=48) as srv:
        assert (await allocate(srv, ONE_64[0]))["type"] == "allocated"
        assert (await allocate(srv, NEXT_64))["type"] == "allocated"  # same /48
        refused = await allocate(srv, "2001:db8:1:ffff::9")
        assert refused["type"] == "error" and refused["error"].startswith(NAMEPLATES)
        assert (await allocate(srv, OTHER_48))["type"] == "allocated"


async def test_one_64_shares_one_stored_bytes_quota(make_server: Any) -> None:
    body = "ab" * 1000  # 1000 bytes stored
    async with make_server(limits=Limits(max_stored_bytes_per_address=2500)) as srv:
        errors = []
        for n, address in enumerate(ONE_64[:3]):
            client = await client_at(srv, address)
            await client.open(f"mbx{n}")
            await client.send("add", phase="p", body=body)
            reply = await client.next_non_ack()
            errors.append(reply.get("error"))
            await client.disconnect()  # without close: its bytes stay charged
        assert errors[:2] == [None, None]
        assert errors[2] is not None and errors[2].startswith(BYTES)
        other = await client_at(srv, NEXT_64)
        await other.open("mbx-other")
        assert (await other.add("p", body))["type"] == "message"
        await other.disconnect()


async def _status(srv: MailboxServer) -> dict[str, Any]:
    status, _, body = await http_get(f"http://127.0.0.1:{srv.admin_port}/status.json")
    assert status == 200
    return json.loads(body)  # type: ignore[no-any-return]


async def test_one_64_shares_the_connections_per_address(make_server: Any) -> None:
    async with make_server(max_connections_per_address=3) as srv:
        held = [await open_client(srv.url, {"X-Real-IP": a}) for a in ONE_64[:3]]
        with pytest.raises(websockets.InvalidStatus) as refused:
            await open_client(srv.url, {"X-Real-IP": ONE_64[3]})
        assert refused.value.response.status_code == 429
        held.append(await open_client(srv.url, {"X-Real-IP": NEXT_64}))
        busiest = dict(map(tuple, (await _status(srv))["addresses"]["connections"]))
        assert busiest["2001:db8:1:2::/64"] == 3
        assert busiest["2001:db8:1:3::/64"] == 1
        for client in held:
            await client.disconnect()


async def test_the_welcome_keeps_the_real_address(make_server: Any) -> None:
    async with make_server() as srv:
        v6 = await open_client(srv.url, {"X-Real-IP": ONE_64[2], "X-Real-Port": "4242"})
        assert v6.welcome["your-address"] == {"ipv6": ONE_64[2], "port": 4242}
        mapped = await open_client(srv.url, {"X-Real-IP": "::ffff:192.0.2.7"})
        assert mapped.welcome["your-address"] == {"ipv4": "192.0.2.7"}
        for client in (v6, mapped):
            await client.disconnect()


async def test_ipv4_and_mapped_ipv4_count_as_before(make_server: Any) -> None:
    async with make_server(limits=Limits(max_nameplates_per_address=2)) as srv:
        # one IPv4 client, whether it arrives as IPv4 or IPv4-mapped IPv6
        assert (await allocate(srv, "192.0.2.7"))["type"] == "allocated"
        assert (await allocate(srv, "::ffff:192.0.2.7"))["type"] == "allocated"
        assert (await allocate(srv, "192.0.2.7"))["type"] == "error"
        # its neighbour in the same /24 is another client
        assert (await allocate(srv, "192.0.2.8"))["type"] == "allocated"


async def test_a_restart_rebuilds_the_counts_by_prefix(make_server: Any) -> None:
    limits = Limits(max_nameplates_per_address=3)
    async with make_server(limits=limits) as srv:
        for address in ONE_64[:3]:
            assert (await allocate(srv, address))["type"] == "allocated"
    async with make_server(limits=limits) as srv:
        refused = await allocate(srv, ONE_64[3])
        assert refused["type"] == "error" and refused["error"].startswith(NAMEPLATES)
        assert (await allocate(srv, NEXT_64))["type"] == "allocated"


@pytest.mark.sqlite_only
async def test_owners_stored_as_full_addresses_are_regrouped(make_server: Any) -> None:
    """A data directory written while every address counted alone (prefix 128, or a
    version before the rule) is counted by /64 once the server restarts."""
    limits = Limits(max_nameplates_per_address=3)
    async with make_server(limits=limits, ipv6_prefix=128) as srv:
        for address in ONE_64[:4]:
            assert (await allocate(srv, address))["type"] == "allocated"
    async with make_server(limits=limits) as srv:
        refused = await allocate(srv, ONE_64[4])
        assert refused["type"] == "error" and refused["error"].startswith(NAMEPLATES)
        assert srv.ctx.ledger.nameplates_by["2001:db8:1:2::/64"] == 4


async def test_refusal_logs_name_the_prefix(
    make_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="pigeonhole.server")
    async with make_server(limits=Limits(max_nameplates_per_address=1)) as srv:
        await allocate(srv, ONE_64[0])
        await allocate(srv, ONE_64[1])
    lines = [r.getMessage() for r in caplog.records if NAMEPLATES in r.getMessage()]
    assert lines and all("2001:db8:1:2::/64" in line for line in lines)
    assert not any(ONE_64[1] in line for line in lines)


async def test_blur_usage_logs_no_address(
    make_server: Any, caplog: pytest.LogCaptureFixture, store: str | None
) -> None:
    caplog.set_level("INFO", logger="pigeonhole.server")
    limits = Limits(max_nameplates_per_address=1)
    async with make_server(limits=limits, blur_usage=60) as srv:
        await allocate(srv, ONE_64[0])
        refused = await allocate(srv, ONE_64[1])
        if store is None:  # SQLite counts it in memory; PostgreSQL nodes keep no owner
            assert refused["type"] == "error"
        assert "addresses" not in await _status(srv)
    assert not any("2001:db8" in r.getMessage() for r in caplog.records)
