"""Fixtures: Pigeonhole's relay (per test, in its loop) and the reference relay (per module)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from pigeonhole.transit import TransitConfig
from tests.transit.transit_support import Reference, Relay


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    async with Relay(TransitConfig()) as running:
        yield running


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    ref = Reference(tmp_path_factory.mktemp("transit-reference"))
    try:
        yield ref
    finally:
        ref.stop()
