"""Permissions over real WebSocket connections: welcome, stamps, old clients, rising bits.

Stamps come from the independent `hashcash` program (Debian) as well as our own minting;
the bits are kept low (8-10) so the tests stay fast.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

import pytest
import websockets

from pigeonhole.permissions.hashcash import mint_stamp
from tests.limits.limits_support import StartServer, call, connect


def program_stamp(resource: str, bits: int) -> str:
    program = shutil.which("hashcash")
    assert program is not None, "the hashcash program is installed by scripts/setup --test"
    out = subprocess.run(
        [program, "-m", "-q", "-b", str(bits), resource], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


BIND = {"type": "bind", "appid": "app", "side": "s1", "client_version": ["python", "0.17"]}


async def test_hashcash_welcome_has_bits_and_a_fresh_resource(start_server: StartServer) -> None:
    async with start_server(permissions=("hashcash",), hashcash_bits=9) as srv:
        a, b = await connect(srv.url), await connect(srv.url)
        ha, hb = (ws.welcome["permission-required"]["hashcash"] for ws in (a, b))
        assert ha["bits"] == hb["bits"] == 9
        assert ha["resource"] != hb["resource"]
        assert ":" not in ha["resource"] and ha["resource"] == ha["resource"].lower()
        assert "none" not in a.welcome["permission-required"]


@pytest.mark.parametrize("kind", ["submit-permissions", "submit-permission"])
@pytest.mark.parametrize("minter", ["hashcash-program", "ours"])
async def test_a_good_stamp_lets_the_client_bind(
    start_server: StartServer, kind: str, minter: str
) -> None:
    """Both spellings (the Rust client sends the singular) and both minters are accepted."""
    async with start_server(permissions=("hashcash",), hashcash_bits=9) as srv:
        ws = await connect(srv.url)
        required = ws.welcome["permission-required"]["hashcash"]
        make = program_stamp if minter == "hashcash-program" else mint_stamp
        stamp = make(required["resource"], required["bits"])
        await ws.send(json.dumps({"type": kind, "method": "hashcash", "stamp": stamp}))
        ack = json.loads(await ws.recv())
        assert ack["type"] == "ack"
        reply = await call(ws, type="list", id="l")  # rejected if bind had failed
        assert reply["type"] == "error" and reply["error"] == "must bind first"
        await ws.send(json.dumps(BIND))
        assert json.loads(await ws.recv())["type"] == "ack"
        assert (await call(ws, type="list"))["type"] == "nameplates"
        assert srv.ctx.metrics.permissions["granted"] >= 1


@pytest.mark.parametrize(
    ("stamp_for", "expected"),
    [
        (lambda r: mint_stamp("someone-else", 9), "for another resource"),
        (lambda r: mint_stamp(r, 4), "claims 4 bits, 9 required"),
        (lambda r: mint_stamp(r, 9, time.time() - 10 * 86400), "expired or from the future"),
        (lambda r: "1:9:garbage", "must have 7 fields"),
        (lambda r: 12345, "requires a 'stamp' string"),
    ],
    ids=["other-resource", "too-few-bits", "old-date", "malformed", "not-a-string"],
)
async def test_bad_stamps_are_refused_and_bind_stays_closed(
    start_server: StartServer, stamp_for: object, expected: str
) -> None:
    async with start_server(permissions=("hashcash",), hashcash_bits=9) as srv:
        ws = await connect(srv.url)
        resource = ws.welcome["permission-required"]["hashcash"]["resource"]
        stamp = stamp_for(resource)  # type: ignore[operator]
        reply = await call(ws, type="submit-permissions", method="hashcash", stamp=stamp)
        assert reply["type"] == "error"
        assert reply["error"].startswith("submit-permissions failed:")
        assert expected in reply["error"]
        assert reply["orig"]["type"] == "submit-permissions"
        # the connection lives, but bind is still refused, then the server closes
        reply = await call(ws, **BIND)
        assert reply["type"] == "error" and "permission required" in reply["error"]
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 1008
        assert srv.ctx.metrics.permissions["refused"] >= 1


async def test_unoffered_method_is_refused(start_server: StartServer) -> None:
    async with start_server(permissions=("hashcash",), hashcash_bits=9) as srv:
        ws = await connect(srv.url)
        reply = await call(ws, type="submit-permissions", method="none")
        assert reply["type"] == "error" and "is not one of: hashcash" in reply["error"]


async def test_old_client_binding_without_permission(start_server: StartServer) -> None:
    """Served when `none` is offered; refused and closed when only hashcash is."""
    async with start_server(permissions=("none", "hashcash"), hashcash_bits=9) as srv:
        ws = await connect(srv.url)
        await ws.send(json.dumps(BIND))
        assert json.loads(await ws.recv())["type"] == "ack"
        assert (await call(ws, type="list"))["type"] == "nameplates"
    async with start_server(permissions=("hashcash",), hashcash_bits=9) as srv:
        ws = await connect(srv.url)
        reply = await call(ws, **BIND)
        assert reply["error"] == "permission required: send submit-permissions before bind"
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 1008


async def test_required_bits_rise_with_the_connection_rate(start_server: StartServer) -> None:
    """A burst of new connections raises the bits told to the next ones (load-adaptive)."""
    async with start_server(
        permissions=("hashcash",),
        hashcash_bits=9,
        hashcash_max_bits=12,
        hashcash_load_threshold=2.0,
    ) as srv:
        first = await connect(srv.url)
        assert first.welcome["permission-required"]["hashcash"]["bits"] == 9
        burst = [await connect(srv.url) for _ in range(60)]  # ~6/s over the 10 s window
        bits = [ws.welcome["permission-required"]["hashcash"]["bits"] for ws in burst]
        assert bits == sorted(bits), "bits only rise while the rate rises"
        assert 9 < bits[-1] <= 12, bits  # risen, never past the maximum
        assert srv.ctx.permissions.current_bits(time.time()) >= bits[-1]
        # a stamp must pay the bits this connection was told
        last = burst[-1]
        resource = last.welcome["permission-required"]["hashcash"]["resource"]
        reply = await call(
            last, type="submit-permissions", method="hashcash", stamp=mint_stamp(resource, 9)
        )
        assert reply["type"] == "error"
        assert f"claims 9 bits, {bits[-1]} required" in reply["error"]
