"""Transport and envelope: welcome, ack, text frames, malformed input, HTTP, proxy headers."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from tests.support.server import APPID, http_get, open_client, strip, usage_rows

pytestmark = pytest.mark.asyncio


# -- welcome ----------------------------------------------------------------------


async def test_welcome_is_first_text_frame_with_address(server):
    """The first frame is a text `welcome` carrying your-address of the TCP peer."""
    client = await open_client(server.url)
    try:
        frame = client.welcome_frame
        assert isinstance(frame["server_tx"], float)
        address = client.welcome["your-address"]
        assert address["ipv4"] == "127.0.0.1"
        assert isinstance(address["port"], int) and address["port"] > 0
        assert address["port"] == client.ws.local_address[1]
        for key in ("motd", "current_cli_version", "error"):
            assert key not in client.welcome
    finally:
        await client.disconnect()


async def test_welcome_configured_keys(make_server, connect):
    """--motd, --advertise-version and --signal-error appear in the welcome (6.2 #29)."""
    async with make_server(motd="hello", advertise_version="0.99", signal_error="go away") as srv:
        client = await connect(srv)
        assert client.welcome["motd"] == "hello"
        assert client.welcome["current_cli_version"] == "0.99"
        assert client.welcome["error"] == "go away"
        # the server itself still accepts commands after signalling an error
        await client.bind(APPID, "side1")
        assert strip(await client.call("list")) == {"type": "nameplates", "nameplates": []}


# -- ack and ping ------------------------------------------------------------------


async def test_ack_echoes_id_then_pong(connect):
    """`ping{ping:7,id:"p1"}` gets ack{id:"p1"} then pong{pong:7}; no id -> ack{id:null}."""
    client = await connect()
    await client.send("ping", ping=7, id="p1")
    assert strip(await client.next()) == {"type": "ack", "id": "p1"}
    assert strip(await client.next()) == {"type": "pong", "pong": 7}
    await client.send("ping", ping=8)
    assert strip(await client.next()) == {"type": "ack", "id": None}
    assert strip(await client.next()) == {"type": "pong", "pong": 8}


@pytest.mark.parametrize("value", [{"a": [1, 2]}, [1, "x"], None, "text", 1.5, True])
async def test_pong_echoes_any_json(connect, value):
    """Any JSON value of `ping` comes back as `pong`, and any JSON `id` in the ack."""
    client = await connect()
    await client.send("ping", ping=value, id=value)
    assert strip(await client.next()) == {"type": "ack", "id": value}
    assert strip(await client.next()) == {"type": "pong", "pong": value}


async def test_ping_requires_ping(connect):
    """A ping without `ping` is an error (allowed before bind)."""
    client = await connect()
    await client.expect_error("ping requires 'ping'", "ping")
    await client.quiet()


async def test_binary_frames_accepted_replies_are_text(connect):
    """A JSON object sent as a binary frame is processed; the replies are text frames."""
    client = await connect()
    await client.send_raw(json.dumps({"type": "ping", "ping": "bin", "id": 3}).encode())
    assert strip(await client.next()) == {"type": "ack", "id": 3}  # _recv asserts text
    assert strip(await client.next()) == {"type": "pong", "pong": "bin"}
    await client.send_raw(json.dumps({"type": "bind", "appid": APPID, "side": "s"}).encode())
    await client.expect_ack()
    assert strip(await client.call("list")) == {"type": "nameplates", "nameplates": []}


async def test_unknown_keys_are_ignored(connect):
    """Extra keys in a client message change nothing."""
    client = await connect()
    await client.send("bind", appid=APPID, side="s", extra={"x": 1}, other=[1])
    await client.expect_ack()
    reply = await client.call("list", whatever=True)
    assert strip(reply) == {"type": "nameplates", "nameplates": []}


async def test_only_message_carries_server_rx_and_id(bound):
    """Direct responses carry no id/server_rx; `message` carries both (reference §2.2)."""
    client = await bound("a")
    claimed = await client.call("claim", nameplate="4", id="c1")
    assert set(claimed) == {"type", "mailbox", "server_tx"}
    await client.send("open", mailbox=claimed["mailbox"], id="o1")
    await client.expect_ack("o1")
    echo = await client.add("pake", "aa", "m1")
    assert set(echo) == {"type", "side", "phase", "body", "server_rx", "id", "server_tx"}
    assert isinstance(echo["server_rx"], float)
    assert echo["id"] == "m1"


# -- malformed input: the connection stays usable ----------------------------------


@pytest.mark.parametrize(
    ("raw", "error", "orig"),
    [
        ("not json{", "message is not valid JSON", "not json{"),
        ("", "message is not valid JSON", ""),
        ("[1, 2]", "message must be a JSON object", [1, 2]),
        ('"text"', "message must be a JSON object", "text"),
        ("42", "message must be a JSON object", 42),
        ("null", "message must be a JSON object", None),
        ('{"foo": 1}', "missing 'type'", {"foo": 1}),
        ('{"id": "x"}', "missing 'type'", {"id": "x"}),
    ],
)
async def test_untyped_frames_error_without_ack(connect, raw, error, orig):
    """Non-JSON, non-object and untyped frames get an error (no ack); the connection lives."""
    client = await connect()
    await client.send_raw(raw)
    assert strip(await client.next()) == {"type": "error", "error": error, "orig": orig}
    await client.quiet()  # no ack came, and a ping still works


async def test_non_json_binary_frame(connect):
    """A binary frame that is not JSON gets the error with the decoded text as orig."""
    client = await connect()
    await client.send_raw(b"\x00garbage")
    reply = await client.next()
    assert (reply["type"], reply["error"]) == ("error", "message is not valid JSON")
    assert reply["orig"] == "\x00garbage"
    await client.quiet()


@pytest.mark.parametrize("mtype", [5, None, ["ping"], {"t": 1}])
async def test_non_string_type_acked_then_error(connect, mtype):
    """A non-string `type` gets an ack, then "'type' must be a string"."""
    client = await connect()
    await client.send_raw(json.dumps({"type": mtype}))
    await client.expect_ack(None)
    reply = strip(await client.next())
    assert reply == {"type": "error", "error": "'type' must be a string", "orig": {"type": mtype}}
    await client.quiet()


async def test_non_string_type_ack_copies_id(connect):
    """The ack for a message with a non-string `type` still echoes its `id`."""
    client = await connect()
    await client.send_raw(json.dumps({"type": 5, "id": "x7"}))
    await client.expect_ack("x7")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"appid": 1, "side": "s"}, "'appid' must be a string"),
        ({"appid": APPID, "side": 2}, "'side' must be a string"),
        ({"appid": None, "side": "s"}, "'appid' must be a string"),
        ({"appid": APPID, "side": ["s"]}, "'side' must be a string"),
    ],
)
async def test_bind_non_string_fields(connect, fields, error):
    """bind with a non-string appid/side is an error and leaves the connection unbound."""
    client = await connect()
    await client.expect_error(error, "bind", **fields)
    await client.expect_error("must bind first", "list")
    await client.bind(APPID, "s")  # a valid bind still works
    assert (await client.call("list"))["type"] == "nameplates"


@pytest.mark.parametrize(
    ("nameplate", "error"),
    [
        ("abc", "nameplate 'abc' has non-digits"),
        ("1" * 41, "nameplate '1111111111'.. is too long, 41>40"),
        (12, "nameplate 12 is <class 'int'> not str"),
        ("", "nameplate '' has non-digits"),
        ("1a", "nameplate '1a' has non-digits"),
    ],
)
async def test_claim_invalid_nameplate(bound, nameplate, error):
    """An invalid nameplate is an error; the same connection can then claim a valid one."""
    client = await bound("s")
    await client.expect_error(error, "claim", nameplate=nameplate)
    mailbox = await client.claim("7")
    assert len(mailbox) == 13


async def test_claim_accepts_forty_digits_and_zero(bound):
    """40 digits, "0" and leading zeros are valid nameplates."""
    for name in ("1" * 40, "0", "007"):
        client = await bound("s-" + name)
        await client.claim(name)


async def test_release_non_string_nameplate(bound):
    """release with a non-string nameplate is an error; a valid release still works."""
    client = await bound("s")
    await client.claim("3")
    await client.expect_error("'nameplate' must be a string", "release", nameplate=3)
    await client.release(nameplate="3")


async def test_open_non_string_mailbox(bound):
    """open with a non-string mailbox is an error; a valid open still works."""
    client = await bound("s")
    await client.expect_error("'mailbox' must be a string", "open", mailbox=["m"])
    assert await client.open("mbox") == []


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"phase": 1, "body": "aa"}, "'phase' must be a string"),
        ({"phase": "p", "body": {"x": 1}}, "'body' must be a string"),
        ({"phase": "p", "body": 170}, "'body' must be a string"),
        ({"phase": "p", "body": "zz"}, "'body' must be a hex string"),
        ({"phase": "p", "body": "abc"}, "'body' must be a hex string"),
        ({"phase": "p", "body": "a a "}, "'body' must be a hex string"),
    ],
)
async def test_add_bad_fields(bound, fields, error):
    """add with a non-string phase/body or a non-hex body is an error; nothing is stored."""
    client = await bound("s")
    assert await client.open("mbox") == []
    await client.expect_error(error, "add", **fields)
    await client.quiet()  # no message was broadcast
    await client.add("p", "AAbb")  # hex of either case is accepted verbatim
    other = await bound("t")
    assert [m["body"] for m in await other.open("mbox")] == ["AAbb"]


async def test_close_non_string_fields(bound):
    """close with a non-string mailbox or mood is an error; a valid close still works."""
    client = await bound("s")
    assert await client.open("mbox") == []
    await client.expect_error("'mailbox' must be a string", "close", mailbox=5)
    await client.expect_error("'mood' must be a string", "close", mood=["happy"])
    await client.close(mood="happy")


@pytest.mark.parametrize(
    "version",
    ["abc", ["python"], [], 5, None, {"a": "b"}],
)
async def test_bad_client_version_recorded_null(server, connect, version):
    """A client_version that is not a list of >= 2 is no error and is recorded as NULL."""
    client = await connect()
    await client.send("bind", appid=APPID, side="s", client_version=version)
    await client.expect_ack()
    assert (await client.call("list"))["type"] == "nameplates"  # bound, and a commit barrier
    rows = usage_rows(server.config, "client_versions")
    assert [(r["side"], r["implementation"], r["version"]) for r in rows] == [("s", None, None)]


# -- HTTP ---------------------------------------------------------------------------


async def test_http_root(server):
    """GET / answers 200 "Wormhole Relay\\n"."""
    status, _, body = await http_get(f"http://127.0.0.1:{server.port}/")
    assert (status, body) == (200, "Wormhole Relay\n")


async def test_http_v1_without_upgrade(server):
    """GET /v1 without an upgrade answers 200 plain text."""
    status, ctype, body = await http_get(f"http://127.0.0.1:{server.port}/v1")
    assert status == 200
    assert ctype.startswith("text/plain")
    assert body


async def test_http_health(server):
    """GET /health answers 200 "ok\\n"."""
    status, _, body = await http_get(f"http://127.0.0.1:{server.port}/health")
    assert (status, body) == (200, "ok\n")


async def test_http_metrics(server, bound):
    """GET /metrics is Prometheus text."""
    client = await bound("s")
    await client.claim("1")
    status, ctype, body = await http_get(f"http://127.0.0.1:{server.admin_port}/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    samples = {}
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            assert line.split()[3] in ("counter", "gauge", "histogram"), line
        elif line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples["pigeonhole_connections"] == 1
    assert samples["pigeonhole_nameplates"] == 1
    assert samples["pigeonhole_mailboxes"] == 1
    assert samples['pigeonhole_commands_total{type="claim"}'] == 1


# -- proxy headers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "address"),
    [
        ({"X-Real-IP": "127.1.2.3", "X-Real-Port": "54321"}, {"ipv4": "127.1.2.3", "port": 54321}),
        ({"X-Real-IP": "::1", "X-Real-Port": "54321"}, {"ipv6": "::1", "port": 54321}),
        ({"X-Real-IP": "203.0.113.9"}, {"ipv4": "203.0.113.9"}),
        ({"X-Real-IP": "2001:db8::7"}, {"ipv6": "2001:db8::7"}),
    ],
)
async def test_proxy_headers_from_trusted_peer(connect, headers, address):
    """X-Real-IP/X-Real-Port from loopback (trusted) set your-address; no port -> no "port"."""
    client = await connect(headers=headers)
    assert client.welcome["your-address"] == address
    await client.quiet()


async def test_proxy_headers_ignored_from_untrusted_peer(make_server, connect):
    """When loopback is not a trusted proxy, X-Real-IP/X-Real-Port are ignored."""
    async with make_server(trusted_proxies=("10.99.0.0/16",)) as srv:
        headers: dict[str, Any] = {"X-Real-IP": "203.0.113.9", "X-Real-Port": "54321"}
        client = await connect(srv, headers=headers)
        address = client.welcome["your-address"]
        assert address == {"ipv4": "127.0.0.1", "port": client.ws.local_address[1]}


# -- deeply nested JSON: refused at decoding, never breaking the connection or server ----

#: 300 nested lists: valid JSON (orjson reads up to 1024 levels deep, writes only 255)
DEEP = json.loads("[" * 300 + "]" * 300)


@pytest.mark.parametrize(
    "message",
    [
        {"type": "ping", "ping": DEEP},
        {"type": "ping", "ping": 1, "id": DEEP},
        {"type": "nope", "x": DEEP},
    ],
    ids=["pong", "ack-id", "error-orig"],
)
async def test_deeply_nested_message_is_refused_and_connection_lives(make_server, connect, message):
    """A message nested too deeply to echo gets an error (raw text as orig); pings still work."""
    async with make_server(shutdown_timeout=0.2) as srv:
        client = await connect(srv)
        raw = json.dumps(message)
        await client.send_raw(raw)
        reply = await asyncio.wait_for(client.next(), 2.0)
        assert reply["type"] == "error"
        assert reply["error"] == "message is nested too deeply"
        assert reply["orig"] == raw
        await asyncio.wait_for(client.sync(), 2.0)


async def test_deeply_nested_add_id_does_not_drop_everyone(make_server, bound):
    """An add with a deeply nested id is refused; neither the sender nor its peer is dropped."""
    async with make_server(shutdown_timeout=0.2) as srv:
        a, b = await bound("a", srv=srv), await bound("b", srv=srv)
        assert await a.open("m") == []
        assert await b.open("m") == []
        await a.send_raw(json.dumps({"type": "add", "phase": "p", "body": "aa", "id": DEEP}))
        reply = await asyncio.wait_for(a.next(), 2.0)
        assert reply["error"] == "message is nested too deeply", reply
        await asyncio.wait_for(b.sync(), 2.0)  # the peer is still connected
        await asyncio.wait_for(a.sync(), 2.0)
        later = await bound("later", srv=srv)
        claimed = await asyncio.wait_for(later.call("claim", nameplate="1"), 2.0)
        assert claimed["type"] == "claimed", claimed
        assert srv.ctx.metrics.storage_failures == 0


async def test_unparsable_x_real_ip_falls_back_to_peer(connect):
    """An X-Real-IP that is not an address is ignored: your-address is the TCP peer."""
    client = await connect(headers={"X-Real-IP": "garbage", "X-Real-Port": "5"})
    assert client.welcome["your-address"] == {
        "ipv4": "127.0.0.1",
        "port": client.ws.local_address[1],
    }


async def test_ipv6_peer_address(make_server, connect):
    """Over IPv6 loopback, your-address is {"ipv6": "::1", "port": ...}."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("no IPv6 loopback")
    async with make_server(host="::1") as srv:
        client = await connect(srv)
        assert client.welcome["your-address"] == {
            "ipv6": "::1",
            "port": client.ws.local_address[1],
        }
        await client.bind(APPID, "s")
        await client.quiet()
