"""A small WebSocket client for the limit and transport tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import websockets

StartServer = Callable[..., Any]


async def call(ws: Any, **msg: Any) -> dict[str, Any]:
    """Send a typed message and return the first reply that is not an ack."""
    await ws.send(json.dumps(msg))
    while True:
        reply = json.loads(await ws.recv())
        if reply["type"] != "ack":
            return reply  # type: ignore[no-any-return]


async def connect(url: str, **kw: Any) -> Any:
    ws = await websockets.connect(url, **kw)
    welcome = json.loads(await ws.recv())
    assert welcome["type"] == "welcome"
    ws.welcome = welcome["welcome"]
    return ws
