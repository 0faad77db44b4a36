"""An in-process server on 127.0.0.1 with per-test configuration."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pigeonhole.config import ServerConfig
from pigeonhole.server.app import MailboxServer
from tests.limits.limits_support import StartServer


@pytest.fixture
def start_server(tmp_path: Path) -> StartServer:
    """`async with start_server(**config_overrides) as srv:` runs a server on a free port."""

    @asynccontextmanager
    async def start(**overrides: Any) -> AsyncIterator[MailboxServer]:
        config = ServerConfig(
            host="127.0.0.1", port=0, admin_port=0, transit_port=0, data_dir=tmp_path
        )
        config = replace(config, **overrides)
        async with MailboxServer(config) as server:
            yield server

    return start
