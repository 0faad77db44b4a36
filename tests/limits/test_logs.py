"""Log lines for notable events; no client address when usage is blurred."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import websockets

from pigeonhole.protocol.limits import Limits
from tests.limits.limits_support import StartServer, connect

STORM = Limits(commands_per_second=1.0, command_burst=3.0)


async def storm_until_closed(url: str) -> None:
    ws = await connect(url, additional_headers={"X-Real-IP": "198.51.100.7"})
    with pytest.raises(websockets.ConnectionClosed):
        for i in range(50):
            await ws.send(json.dumps({"type": "ping", "ping": i}))
            await asyncio.sleep(0)
        while True:
            await asyncio.wait_for(ws.recv(), 5)


@pytest.mark.parametrize("blur", [None, 60])
async def test_close_is_logged_with_address_unless_blurred(
    start_server: StartServer, caplog: pytest.LogCaptureFixture, blur: int | None
) -> None:
    caplog.set_level(logging.INFO, logger="pigeonhole")
    async with start_server(limits=STORM, blur_usage=blur) as srv:
        await storm_until_closed(srv.url)
    closing = [r for r in caplog.records if r.getMessage().startswith("closing connection")]
    assert len(closing) == 1
    line = closing[0].getMessage()
    fields = closing[0].fields  # type: ignore[attr-defined]
    assert fields["code"] == 1008 and "too many commands" in fields["reason"]
    text = "\n".join(r.getMessage() + repr(getattr(r, "fields", "")) for r in caplog.records)
    if blur is None:
        assert "address=198.51.100.7" in line
    else:
        assert "198.51.100.7" not in text and "address" not in fields
