"""The status page's figures on a real `pigeonhole serve` during a flood, with real
`wormhole send`/`receive` transfers beside it: the transfers count as happy exchanges of
the wormhole app id, the flood as limit hits, and the public port shows none of it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import websockets

from tests.abuse.abuse_support import ADMIN_PORTS, get, running_server, transfer

pytestmark = pytest.mark.interop

WORMHOLE_APP = "lothar.com/wormhole/text-or-file-xfer"
ATTACKER = {"X-Real-IP": "203.0.113.66"}  # through the trusted loopback "proxy"


async def test_status_during_a_flood_with_real_transfers(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", "--max-connections-per-address", "10") as (url, _):
        held, refused = [], 0
        for _ in range(25):  # 10 accepted, 15 refused with HTTP 429
            try:
                held.append(await websockets.connect(url, additional_headers=ATTACKER))
            except websockets.InvalidStatus as err:
                assert err.response.status_code == 429
                refused += 1
        results = await asyncio.gather(*(transfer(url, f"hello {i}") for i in range(2)))
        assert [r[:2] for r in results] == [(0, 0), (0, 0)]
        admin = f"http://127.0.0.1:{ADMIN_PORTS[url]}"
        figures = json.loads(await asyncio.to_thread(get, admin + "/status.json"))
        public = url.replace("ws://", "http://").replace("/v1", "/status.json")
        with pytest.raises(OSError):  # 404 on the public port
            await asyncio.to_thread(get, public)
        for ws in held:
            await ws.close()
    hour = figures["hour"]
    assert refused == 15 and hour["limits"] == {"connections per address": 15}
    assert hour["started"] == 2 and hour["finished"]["happy"] == 2
    assert hour["success_rate"] == 1.0
    assert hour["apps"] == [[WORMHOLE_APP, 2]]
    assert figures["connections"]["total"] >= 10 + 4
    assert ["203.0.113.66", 10] in figures["addresses"]["connections"]
