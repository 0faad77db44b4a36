"""`pigeonhole archive post|query` against a live archive (CliRunner in a worker thread)."""

from __future__ import annotations

import asyncio
import json
import time

from click.testing import CliRunner, Result

from pigeonhole.archive import errors
from pigeonhole.archive.envelopes import decode_envelope
from pigeonhole.cli.archive import archive
from tests.archive.archive_support import RunArchive

PASSWORD = "status-offline-inbox"
TOPIC = "1f7ea17f"
OTHER = "0xf26e7779"


async def _cli(*args: str) -> Result:
    """Run the `archive` group in a thread: it calls asyncio.run itself."""
    return await asyncio.to_thread(CliRunner().invoke, archive, list(args))


async def _post(url: str, topic: str, data: str, sent: int, ttl: int = 86_400) -> str:
    result = await _cli(
        "post",
        "--url",
        url,
        "--topic",
        topic,
        "--data",
        data,
        "--sent",
        str(sent),
        "--ttl",
        str(ttl),
    )
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def _lines(result: Result) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


async def test_post_then_query(run_archive: RunArchive) -> None:
    """post prints the hash; query prints each envelope as JSON, then the completion."""
    async with run_archive(min_pow=0.001) as live:
        now = int(time.time())
        live.clock.now = now
        first = await _post(live.url, TOPIC, "deadbeef", now - 20)
        second = await _post(live.url, OTHER, "00", now - 10)
        third = await _post(live.url, "0x" + TOPIC, "cafe", now - 5)
        assert len(first) == 64 and int(first, 16) >= 0

        result = await _cli(
            "query",
            "--url",
            live.url,
            "--password",
            PASSWORD,
            "--from",
            str(now - 30),
            "--to",
            str(now),
            "--topic",
            TOPIC,
        )
        assert result.exit_code == 0, result.output
        *envelopes, completion = _lines(result)
        assert [e["hash"] for e in envelopes] == [first, third]
        assert envelopes[0]["topic"] == TOPIC and envelopes[0]["sent"] == now - 20
        assert envelopes[0]["ttl"] == 86_400
        raw = decode_envelope(bytes.fromhex(str(envelopes[0]["rlp"])))
        assert raw.data == bytes.fromhex("deadbeef") and raw.hash.hex() == first
        assert completion["last_hash"] == third and completion["cursor"] is None
        assert len(str(completion["request_id"])) == 64
        assert second not in result.stdout


async def test_query_limit_cursor_and_all(run_archive: RunArchive) -> None:
    """--limit pages with a cursor, --cursor resumes after it, --all reads to the end."""
    async with run_archive() as live:
        now = int(time.time())
        live.clock.now = now
        hashes = [await _post(live.url, TOPIC, f"{i:02x}", now - 50 + i) for i in range(5)]
        common = [
            "query",
            "--url",
            live.url,
            "--password",
            PASSWORD,
            "--from",
            str(now - 60),
            "--to",
            str(now),
        ]

        page1 = _lines(await _cli(*common, "--limit", "2"))
        assert [e["hash"] for e in page1[:-1]] == hashes[:2]
        cursor = str(page1[-1]["cursor"])
        assert len(cursor) == 72
        page2 = _lines(await _cli(*common, "--limit", "2", "--cursor", cursor))
        assert [e["hash"] for e in page2[:-1]] == hashes[2:4]

        every = _lines(await _cli(*common, "--limit", "2", "--all"))
        assert [e["hash"] for e in every[:-1]] == hashes
        assert every[-1]["cursor"] is None and every[-1]["last_hash"] == hashes[-1]


async def test_query_wrong_password_fails(run_archive: RunArchive) -> None:
    """A wrong password prints the ERROR= completion's text and exits 1."""
    async with run_archive() as live:
        result = await _cli(
            "query", "--url", live.url, "--password", "nope", "--from", "0", "--to", "10"
        )
        assert result.exit_code == 1
        assert _lines(result)[-1]["error"] == errors.DECRYPT_FAILED


async def test_post_refused_fails(run_archive: RunArchive) -> None:
    """A back-dated, expired envelope is refused unless the archive accepts imports."""
    async with run_archive() as live:
        live.clock.now = time.time()
        result = await _cli(
            "post", "--url", live.url, "--topic", TOPIC, "--data", "00", "--sent", "1000000000"
        )
        assert result.exit_code == 1
        assert errors.VERY_OLD in result.output
    async with run_archive(accept_expired=True) as live:
        live.clock.now = time.time()
        assert len(await _post(live.url, TOPIC, "00", 1_000_000_000, ttl=50)) == 64


async def test_bad_arguments_and_unreachable_server() -> None:
    """A malformed topic is a usage error; an unreachable URL a clean error, no traceback."""
    bad_topic = await _cli(
        "post", "--url", "ws://127.0.0.1:9/", "--topic", "abcdef", "--data", "00"
    )
    assert bad_topic.exit_code == 2 and "4 bytes" in bad_topic.output
    unreachable = await _cli(
        "post", "--url", "ws://127.0.0.1:9/", "--topic", TOPIC, "--data", "00", "--pow", "0"
    )
    assert unreachable.exit_code == 1 and "Error:" in unreachable.output
