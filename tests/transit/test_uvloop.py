"""The relay under uvloop (the `fast` extra the server may run on): readiness callbacks on
raw sockets and transports set to another protocol must work there too."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from pigeonhole.transit import Mood, TransitConfig
from tests.transit.test_transfer import KINDS, MIB, transfer
from tests.transit.transit_support import Relay


async def ten_pairs(sender: str, receiver: str) -> None:
    assert "uvloop" in type(asyncio.get_running_loop()).__module__
    async with Relay(TransitConfig()) as relay:
        await asyncio.gather(*(transfer(relay, sender, receiver, MIB + i) for i in range(10)))
        await relay.settle()
        assert [r.result for r in relay.records] == [Mood.HAPPY] * 10


@pytest.mark.parametrize("sender", KINDS)
@pytest.mark.parametrize("receiver", KINDS)
def test_every_combination_under_uvloop(sender: str, receiver: str) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(ten_pairs(sender, receiver))
