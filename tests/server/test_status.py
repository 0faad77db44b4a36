"""The admin listener and /status.json: its figures after known real exchanges, the rings,
what the public listener no longer answers, and no client address under --blur-usage."""

from __future__ import annotations

import json
import re

import pytest

from pigeonhole.protocol.channels import MAX_APPS_COUNTED, OTHER_APPS, Rendezvous
from pigeonhole.protocol.limits import BODY_TOO_LARGE, Limits
from pigeonhole.server.status import MINUTES, RESULTS
from pigeonhole.server.wiring import SECURE_RANDOMNESS
from tests.server.status_support import OTHER_APP, crowded, exchange, status, until
from tests.support.server import APPID, http_get

pytestmark = pytest.mark.asyncio

EXPIRY = 660.0
#: an IPv4 address, or an IPv6 one with at least two colons between hex groups
ADDRESS = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b|\b[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}\b", re.I)


async def test_figures_after_known_exchanges(make_server, bound, clock):
    """Ten real mailboxes with every result, two apps, a refused body: the JSON says so."""
    async with make_server(limits=Limits(max_body_bytes=16)) as srv:
        for i, (mood_a, mood_b) in enumerate(
            [("happy", "happy")] * 3 + [("scary", "happy"), ("errory", "happy")]
        ):
            await exchange(bound, str(10 + i), mood_a, mood_b, srv=srv)
        for i in range(2):
            await exchange(bound, str(20 + i), appid=OTHER_APP, srv=srv)
        alone = await bound("a", APPID, srv)
        assert await alone.open("solo") == []
        await alone.expect_error(
            f"{BODY_TOO_LARGE} (32 > 16 bytes)", "add", phase="p", body="ab" * 32
        )
        await alone.close(mood="lonely")
        await alone.disconnect()
        await crowded(bound, "three", srv)
        left = await bound("a", APPID, srv)
        await left.claim("30")  # then leaves: pruned below
        await left.disconnect()
        await until(lambda: not srv.ctx.clients)
        clock.advance(EXPIRY + 1)
        assert await srv.prune_now() == 1
        figures = await status(srv)

    hour = figures["hour"]
    assert hour["started"] == 10
    assert hour["finished"] == {
        "happy": 5,
        "lonely": 1,
        "scary": 1,
        "errory": 1,
        "pruney": 1,
        "crowded": 1,
        "quiet": 0,
    }
    assert hour["finished_total"] == 10 and hour["success_rate"] == 0.5
    assert hour["apps"] == [[APPID, 8], [OTHER_APP, 2]]
    assert hour["messages"] == 14  # two `add`s per exchange; the refused one is not stored
    assert hour["limits"] == {BODY_TOO_LARGE: 1}
    assert hour["connections_new"] == 7 * 2 + 1 + 3 + 1
    assert figures["connections"] == {"now": 0, "total": 19}
    assert figures["live"] == {"nameplates": 0, "mailboxes": 0, "apps": 0}
    assert figures["storage"]["stored_bytes"] == 0
    assert figures["storage"]["disk_free"] > 0
    # measured when the server started: the usage database exists, with its schema
    assert figures["storage"]["usage_db_bytes"] > 0
    assert figures["commits"]["batches"] > 0 and figures["commits"]["hour_mean_ms"] > 0
    kind = "SQLite" if srv.config.store is None else "PostgreSQL"
    assert figures["store"]["kind"] == kind and figures["health"] == "ok"
    assert figures["blurred"] is False and "addresses" in figures
    assert hour["permissions"] == {"challenged": 0, "granted": 0, "refused": 0, "required": 0}
    # the minutes add up to the hour, the last one being the minute in progress
    minutes = figures["minutes"]
    n = len(minutes["start"])
    assert 2 <= n <= MINUTES + 1  # the clock moved 11 minutes: closed minutes exist
    assert sum(minutes["started"]) == 10 and sum(minutes["connections_new"]) == 19
    for result in RESULTS:
        assert len(minutes["finished"][result]) == n
        assert sum(minutes["finished"][result]) == hour["finished"][result]
    assert minutes["limits"] == {BODY_TOO_LARGE: [*minutes["limits"][BODY_TOO_LARGE]]}
    assert sum(minutes["limits"][BODY_TOO_LARGE]) == 1
    assert minutes["start"] == sorted(minutes["start"]) and minutes["start"][-1] % 60 == 0
    # never a mailbox id, a nameplate or a message body
    text = json.dumps(figures)
    assert "solo" not in text and "three" not in text and '"aa"' not in text


async def test_the_rings_keep_one_hour(make_server, bound, clock):
    """Closed minutes go into a ring of 60; figures older than an hour drop out of it."""
    async with make_server() as srv:
        await exchange(bound, "4", srv=srv)
        clock.advance(60)
        srv.status.tick()
        closed = list(srv.status.minutes)
        assert sum(m.gained.started for m in closed) == 1
        assert (await status(srv))["hour"]["started"] == 1
        clock.advance(61 * 60)
        srv.status.tick()
        assert len(srv.status.minutes) == MINUTES
        figures = await status(srv)
        assert figures["hour"]["started"] == 0 and len(figures["minutes"]["start"]) == MINUTES + 1
        await exchange(bound, "5", "scary", srv=srv)
        figures = await status(srv)
        assert figures["hour"]["finished"]["scary"] == 1
        assert figures["minutes"]["finished"]["scary"][-1] == 1  # the minute in progress


async def test_public_listener_keeps_its_routes_only(make_server):
    """By default the public port answers /, /health and /v1, not /metrics nor /status."""
    async with make_server() as srv:
        public = f"http://127.0.0.1:{srv.port}"
        admin = f"http://127.0.0.1:{srv.admin_port}"
        assert srv.admin_port not in (None, srv.port)
        for path in ("/metrics", "/status", "/status.json"):
            assert (await http_get(public + path))[0] == 404, path
        assert (await http_get(public + "/"))[0] == 200
        assert (await http_get(public + "/health"))[0:3:2] == (200, "ok\n")
        for path, kind in [
            ("/metrics", "text/plain"),
            ("/status", "text/html"),
            ("/status.json", "application/json"),
            ("/health", "text/plain"),
        ]:
            code, ctype, _ = await http_get(admin + path)
            assert code == 200 and ctype.startswith(kind), (path, code, ctype)
    async with make_server(public_metrics=True) as srv:
        public = f"http://127.0.0.1:{srv.port}"
        code, _, body = await http_get(public + "/metrics")
        assert code == 200 and "pigeonhole_connections_total" in body
        assert (await http_get(public + "/status"))[0] == 404
    async with make_server(admin=False) as srv:
        assert srv.admin_port is None


async def test_the_page_is_self_contained(make_server):
    """One HTML file: no external script, style, font or image; a strict CSP."""
    async with make_server() as srv:
        code, _, page = await http_get(f"http://127.0.0.1:{srv.admin_port}/status")
    assert code == 200 and 'fetch("status.json"' in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert len(page.encode()) < 40_000


async def test_no_address_under_blur_usage(make_server, connect):
    """With --blur-usage nothing in /status.json or /metrics is a client address; without,
    the busiest addresses are listed (the check is not vacuous)."""
    headers = {"X-Real-IP": "203.0.113.9"}  # loopback is a trusted proxy
    for blur in (None, 60):
        async with make_server(blur_usage=blur) as srv:
            client = await connect(srv, headers)
            await client.bind(APPID, "a")
            await client.open("m")
            await client.add("p", "aa")
            figures = await status(srv)
            text = json.dumps(figures)
            metrics = (await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics"))[2]
            await client.disconnect()
        if blur is None:
            assert figures["addresses"]["connections"] == [["203.0.113.9", 1]]
            assert figures["addresses"]["stored_bytes"] == [["203.0.113.9", 1]]
        else:
            assert figures["blurred"] is True and "addresses" not in figures
            assert not ADDRESS.search(text), ADDRESS.search(text)
            assert not ADDRESS.search(metrics)


async def test_status_json_stays_the_same_size(make_server, bound, clock):
    """The rings are fixed: three hours of minutes give the JSON of one hour (the time it
    takes to build is measured in bench/status_cost.py, not asserted here)."""
    from pigeonhole.server.status import status_json

    async with make_server() as srv:
        await exchange(bound, "6", srv=srv)
        sizes = []
        for _ in range(3):
            for _ in range(MINUTES):
                clock.advance(60)
                srv.status.tick()
            sizes.append(len(json.dumps(status_json(srv.ctx, srv.status))))
    assert max(sizes) - min(sizes) < 200, sizes  # only the figures differ (uptime, ...)


async def test_app_counts_are_bounded() -> None:
    """Made-up app ids cannot grow the per-minute app counter past its bound."""
    rz = Rendezvous(SECURE_RANDOMNESS)
    for i in range(300):
        rz.open(f"app{i}", "m", "a", 0.0, [])
    assert rz.mailboxes_created == 300
    assert len(rz.created_by_app) == MAX_APPS_COUNTED + 1
    assert rz.created_by_app[OTHER_APPS] == 300 - MAX_APPS_COUNTED
