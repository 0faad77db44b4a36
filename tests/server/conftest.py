"""Fixtures for the black-box server tests: real WebSocket connections on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from pigeonhole.server.app import MailboxServer
from tests.support.postgres import fresh_database
from tests.support.server import APPID, Client, FakeClock, base_config, open_client

#: durability is proven by the subprocess tests on disk; in-process ones may use tmpfs
SHM = Path("/dev/shm")

MakeServer = Callable[..., AbstractAsyncContextManager[MailboxServer]]
Connect = Callable[..., Awaitable[Client]]


@pytest.fixture
def clock() -> FakeClock:
    """The servers' clock: real time plus an offset the test can advance."""
    return FakeClock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """The in-process servers' DATA_DIR: on tmpfs when there is one (fsync is ~free)."""
    if not SHM.is_dir() or not os.access(SHM, os.W_OK):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(prefix="pigeonhole-test-", dir=SHM) as path:
        yield Path(path)


#: the stores every black-box test runs against (tests marked `sqlite_only` test what
#: only the SQLite store has: its helper process, its files)
STORES = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: runs against the SQLite store only")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_kind" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("store_kind", STORES[:1] if only else STORES)


@pytest.fixture
def store(store_kind: str) -> Iterator[str | None]:
    """The `store` setting: None (SQLite in the data directory) or a fresh PostgreSQL
    database, dropped after the test (tests/support/postgres.py)."""
    if store_kind == "sqlite":
        yield None
        return
    with fresh_database() as url:
        yield url


@pytest.fixture
def make_server(data_dir: Path, clock: FakeClock, store: str | None) -> MakeServer:
    """`async with make_server(clock=..., **config) as srv:` runs a server on a free port,
    on each store in turn (the test runs once per store)."""

    @asynccontextmanager
    async def start(
        clock: Callable[[], float] = clock, **overrides: Any
    ) -> AsyncIterator[MailboxServer]:
        overrides.setdefault("store", store)
        async with MailboxServer(base_config(data_dir, **overrides), clock=clock) as srv:
            yield srv

    return start


@pytest.fixture
async def server(make_server: MakeServer, store: str | None) -> AsyncIterator[MailboxServer]:
    """A server with the default configuration, its data in `data_dir` (or a PostgreSQL
    database of its own: a test may start more servers with `make_server` beside it, and
    one database is served by one node)."""
    if store is None:
        async with make_server() as srv:
            yield srv
        return
    with fresh_database() as url:
        async with make_server(store=url) as srv:
            yield srv


@pytest.fixture
async def connect(server: MailboxServer) -> AsyncIterator[Connect]:
    """`await connect(srv=None, headers=None)`: a new client (welcome already read)."""
    clients: list[Client] = []

    async def open_one(
        srv: MailboxServer | None = None, headers: dict[str, str] | None = None
    ) -> Client:
        client = await open_client((srv or server).url, headers)
        clients.append(client)
        return client

    yield open_one
    for client in clients:
        with contextlib.suppress(Exception):
            await client.disconnect()


@pytest.fixture
def bound(connect: Connect) -> Connect:
    """`await bound(side, appid=APPID, srv=None)`: a new client already bound."""

    async def open_bound(side: str, appid: str = APPID, srv: MailboxServer | None = None) -> Client:
        client = await connect(srv)
        await client.bind(appid, side)
        return client

    return open_bound
