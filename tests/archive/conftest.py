"""Fixtures for the archive: a fake clock and a live archive app on 127.0.0.1:0."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.endpoint import ARCHIVE_KEY, add_archive_routes
from pigeonhole.archive.messages import sym_key_from_password
from tests.archive.archive_support import FakeClock, LiveArchive, RunArchive


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sym_key() -> bytes:
    return sym_key_from_password(ArchiveConfig().password)


@pytest.fixture
def run_archive(tmp_path: Path, clock: FakeClock) -> RunArchive:
    """`async with run_archive(**config_overrides) as live:` serves an archive app."""

    @asynccontextmanager
    async def run(**overrides: Any) -> AsyncIterator[LiveArchive]:
        config = replace(ArchiveConfig(data_dir=tmp_path / "data", min_pow=0.0), **overrides)
        app = web.Application()
        add_archive_routes(app, config, clock=clock)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            url = f"ws://127.0.0.1:{port}{config.path}"
            yield LiveArchive(url, config, clock, app[ARCHIVE_KEY])
        finally:
            await runner.cleanup()

    return run
