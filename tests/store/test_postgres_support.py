"""The PostgreSQL test fixtures (tests/support/postgres.py), on the real server."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest

from tests.support.postgres import (
    database_exists,
    database_name,
    fresh_database,
    postgres_admin_url,
    postgres_session_url,
    postgres_url,
    run,
    with_database,
)

__all__ = ["postgres_session_url", "postgres_url"]


async def _user_tables(url: str) -> tuple[str, list[str]]:
    conn = await asyncpg.connect(url)
    try:
        name = await conn.fetchval("SELECT current_database()")
        rows = await conn.fetch(
            "SELECT table_schema || '.' || table_name AS t FROM information_schema.tables"
            " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
    finally:
        await conn.close()
    return name, [r["t"] for r in rows]


def test_fresh_database_exists_is_empty_and_is_dropped() -> None:
    with fresh_database() as url:
        name = database_name(url)
        assert name.startswith("pigeonhole_test_")
        assert database_exists(name)
        assert run(lambda: _user_tables(url)) == (name, [])
        # the URL keeps the server's credentials, host and port
        assert url == with_database(postgres_admin_url(), name)
    assert not database_exists(name)


def test_two_fresh_databases_are_distinct() -> None:
    with fresh_database() as a, fresh_database() as b:
        assert a != b
        assert database_name(a) != database_name(b)

        async def write_one_read_other() -> list[str]:
            conn = await asyncpg.connect(a)
            try:
                await conn.execute("CREATE TABLE only_in_a (x int)")
            finally:
                await conn.close()
            return (await _user_tables(b))[1]

        assert run(write_one_read_other) == []
        assert run(lambda: _user_tables(a))[1] == ["public.only_in_a"]
    assert not database_exists(database_name(a))
    assert not database_exists(database_name(b))


async def test_open_connections_are_ended_at_the_drop() -> None:
    """A connection a test (or a server under test) leaves open does not keep the
    database alive; the context manager works inside an async test's loop too."""
    with fresh_database(prefix="pigeonhole_leftover") as url:
        conn = await asyncpg.connect(url)
        await conn.execute("CREATE TABLE t (x int)")
    try:
        assert not database_exists(database_name(url))
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            await conn.fetchval("SELECT 1")
    finally:
        conn.terminate()


def test_prefix_must_be_a_plain_name() -> None:
    for bad in ["Upper", "semi;colon", "1digit", "x" * 41, ""]:
        with pytest.raises(ValueError), fresh_database(prefix=bad):
            pass


def test_with_database_keeps_the_rest_of_the_url() -> None:
    assert (
        with_database("postgresql://u:p@db.example:6543/admin?sslmode=require", "other")
        == "postgresql://u:p@db.example:6543/other?sslmode=require"
    )
    assert with_database("postgresql://u@h:1", "x") == "postgresql://u@h:1/x"


def test_postgres_url_fixture_in_a_sync_test(postgres_url: str) -> None:
    assert database_exists(database_name(postgres_url))
    assert run(lambda: _user_tables(postgres_url))[1] == []


async def test_postgres_url_fixture_in_an_async_test(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval("SELECT current_database()") == database_name(postgres_url)
        await conn.execute("CREATE TABLE t (x int)")
    finally:
        await conn.close()


async def test_session_database(postgres_session_url: str, postgres_url: str) -> None:
    name = database_name(postgres_session_url)
    assert name.startswith("pigeonhole_session_")
    assert database_exists(name)
    assert postgres_session_url != postgres_url
    conn = await asyncpg.connect(postgres_session_url)
    try:
        assert await conn.fetchval("SELECT current_database()") == name
    finally:
        await conn.close()
