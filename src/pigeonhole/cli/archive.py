"""`pigeonhole archive post|query`: use an archive with no other software.

`post` seals one envelope and prints its hash once the server has committed it.
`query` prints one JSON object per envelope received, then the completion; with `--all`
it follows cursors to the end and prints one completion, the last.
"""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import click

from pigeonhole.archive.bloom import FULL_BLOOM, topics_to_bloom
from pigeonhole.archive.client import ArchiveClient, ArchiveClientError, Reply
from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.envelopes import DEFAULT_TTL, Envelope, parse_topic, seal
from pigeonhole.archive.messages import sym_key_from_password
from pigeonhole.archive.packets import Completion
from pigeonhole.archive.query import ZERO_HASH
from pigeonhole.archive.requests import RequestPayload

DEFAULT_PATH = ArchiveConfig().path


def _url(url: str) -> str:
    """Add the default path (/whisper/v6) when the URL has none."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path=DEFAULT_PATH)
    return urlunsplit(parts)


def _topic(_: click.Context, __: click.Parameter, value: str | tuple[str, ...]) -> object:
    try:
        if isinstance(value, tuple):
            return tuple(parse_topic(v) for v in value)
        return parse_topic(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from err


def _hex(_: click.Context, __: click.Parameter, value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        return bytes.fromhex(value[2:] if value[:2].lower() == "0x" else value)
    except ValueError as err:
        raise click.BadParameter(f"{value!r} is not hex") from err


@click.group("archive")
def archive() -> None:
    """Post envelopes to, and query, a Pigeonhole archive (a Whisper v6 mailserver)."""


@archive.command()
@click.option("--url", required=True, help="Archive WebSocket URL, e.g. ws://HOST:PORT/whisper/v6.")
@click.option("--topic", required=True, callback=_topic, help="Topic, 8 hex digits.")
@click.option("--data", required=True, callback=_hex, help="Envelope data, hex.")
@click.option(
    "--ttl",
    default=DEFAULT_TTL,
    show_default=True,
    type=click.IntRange(1, 2**32 - 1),
    help="Time to live in seconds.",
)
@click.option(
    "--sent",
    type=click.IntRange(0, 2**32 - 1),
    default=None,
    help="Creation time (UNIX seconds) instead of now: back-dates the envelope.",
)
@click.option(
    "--pow",
    "target_pow",
    default=0.001,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Proof of work to seal the envelope to.",
)
def post(
    url: str, topic: bytes, data: bytes, ttl: int, sent: int | None, target_pow: float
) -> None:
    """Archive one envelope; print its hash (hex) once the server committed it."""
    created = int(time.time()) if sent is None else sent
    if created + ttl > 2**32 - 1:
        raise click.BadParameter("sent + ttl must fit in 32 bits", param_hint="--ttl")
    envelope = seal(expiry=created + ttl, ttl=ttl, topic=topic, data=data, target_pow=target_pow)
    refused = asyncio.run(_post(_url(url), envelope))
    if refused:
        raise click.ClickException(f"envelope refused: {refused}")
    click.echo(envelope.hash.hex())


async def _post(url: str, envelope: Envelope) -> str | None:
    try:
        async with ArchiveClient.connect(url) as client:
            refused = await client.post([envelope])
    except (ArchiveClientError, aiohttp.ClientError, OSError) as err:
        raise click.ClickException(str(err)) from err
    return "; ".join(f"{e.description} (code {e.code})" for e in refused) or None


@archive.command()
@click.option("--url", required=True, help="Archive WebSocket URL, e.g. ws://HOST:PORT/whisper/v6.")
@click.option("--password", required=True, help="The archive's password (symmetric key).")
@click.option(
    "--from",
    "lower",
    required=True,
    type=click.IntRange(0, 2**32 - 1),
    help="Oldest creation time, UNIX seconds (inclusive).",
)
@click.option(
    "--to",
    "upper",
    required=True,
    type=click.IntRange(0, 2**32 - 1),
    help="Newest creation time, UNIX seconds (inclusive).",
)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    callback=_topic,
    help="Only this topic (8 hex digits); repeat for several. Default: all.",
)
@click.option(
    "--limit",
    default=0,
    show_default=True,
    type=click.IntRange(0, 2**32 - 1),
    help="Envelopes per page; 0 means the server's default.",
)
@click.option("--cursor", default=None, callback=_hex, help="Resume after this cursor (hex).")
@click.option("--all", "follow", is_flag=True, help="Follow cursors to the last page.")
@click.option(
    "--pow",
    "target_pow",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Proof of work to seal the request to.",
)
def query(
    url: str,
    password: str,
    lower: int,
    upper: int,
    topics: tuple[bytes, ...],
    limit: int,
    cursor: bytes | None,
    follow: bool,
    target_pow: float,
) -> None:
    """Print each envelope in [--from, --to] as JSON, then the completion."""
    payload = RequestPayload(
        lower=lower,
        upper=upper,
        limit=limit,
        cursor=cursor or b"",
        topics=topics,
        bloom=topics_to_bloom(topics) if topics else FULL_BLOOM,
    )
    completion = asyncio.run(_query(_url(url), payload, password, follow, target_pow))
    click.echo(json.dumps(_completion_json(completion)))
    if completion.error is not None:
        raise SystemExit(1)


async def _query(
    url: str, payload: RequestPayload, password: str, follow: bool, target_pow: float
) -> Completion:
    key = sym_key_from_password(password)
    last_hash = ZERO_HASH
    try:
        async with ArchiveClient.connect(url) as client:
            if not follow:
                reply = await client.request(payload, key, target_pow=target_pow)
                _print(reply)
                return reply.completion
            async for reply in client.request_all(payload, key, target_pow=target_pow):
                _print(reply)
                last_hash = reply.envelopes[-1].hash if reply.envelopes else last_hash
            return Completion(
                reply.completion.request_id,
                last_hash,
                reply.completion.cursor,
                reply.completion.error,
            )
    except (ArchiveClientError, aiohttp.ClientError, OSError) as err:
        raise click.ClickException(str(err)) from err


def _print(reply: Reply) -> None:
    for envelope in reply.envelopes:
        click.echo(
            json.dumps(
                {
                    "hash": envelope.hash.hex(),
                    "topic": envelope.topic.hex(),
                    "sent": envelope.created,
                    "ttl": envelope.ttl,
                    "rlp": envelope.rlp.hex(),
                }
            )
        )


def _completion_json(completion: Completion) -> dict[str, object]:
    out: dict[str, object] = {
        "request_id": completion.request_id.hex(),
        "last_hash": completion.last_hash.hex(),
        "cursor": completion.cursor.hex() or None,
    }
    if completion.error is not None:
        out["error"] = completion.error
    return out
