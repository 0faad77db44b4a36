"""The endpoint over a real WebSocket on 127.0.0.1 with a real SQLite file."""

from __future__ import annotations

from collections.abc import Sequence

import aiohttp
import pytest

from pigeonhole.archive import errors, packets, rlp
from pigeonhole.archive.bloom import FULL_BLOOM, topic_to_bloom
from pigeonhole.archive.client import ArchiveClient, Reply
from pigeonhole.archive.envelopes import Envelope
from pigeonhole.archive.messages import padding_length, sym_key_from_password
from pigeonhole.archive.query import KeyRange
from pigeonhole.archive.requests import RequestPayload, encode_payload, seal_request
from pigeonhole.archive.store import ArchiveStore
from tests.archive.archive_support import T0, LiveArchive, RunArchive

TOPIC_A = bytes.fromhex("1f7ea17f")
TOPIC_B = bytes.fromhex("01020300")
LOWER, UPPER = T0 - 3000, T0 - 1000


def _env(created: int, topic: bytes = TOPIC_A, tag: int = 0, ttl: int = 10_000) -> Envelope:
    return Envelope(
        expiry=created + ttl, ttl=ttl, topic=topic, data=tag.to_bytes(4, "big"), nonce=0
    )


async def _post(url: str, envelopes: Sequence[Envelope], chunk: int = 250) -> None:
    async with ArchiveClient.connect(url) as client:
        for i in range(0, len(envelopes), chunk):
            assert await client.post(envelopes[i : i + chunk]) == []


async def _pages(url: str, payload: RequestPayload, key: bytes) -> list[Reply]:
    async with ArchiveClient.connect(url) as client:
        return [reply async for reply in client.request_all(payload, key)]


def _stored(live: LiveArchive) -> list[tuple[bytes, bytes]]:
    store = ArchiveStore(live.config.archive_db)
    store.open()
    try:
        return list(store.scan(KeyRange(start=b"", end=None, after=None)))
    finally:
        store.close()


def _dataset() -> tuple[list[Envelope], list[Envelope]]:
    """1100 envelopes in range on topic A (many sharing a second), plus 300 that are not."""
    wanted = [_env(LOWER + (i * 2000) // 1099, tag=i) for i in range(1100)]
    others = (
        [_env(LOWER - 1, tag=10_000 + i) for i in range(100)]
        + [_env(UPPER + 1, tag=20_000 + i) for i in range(100)]
        + [_env(LOWER + 20 * i, TOPIC_B, tag=30_000 + i) for i in range(100)]
    )
    return wanted, others


async def test_post_is_acknowledged_then_served(run_archive: RunArchive, sym_key: bytes) -> None:
    """A posted envelope is acknowledged, counted once, and served back byte for byte."""
    async with run_archive() as live:
        envelope = _env(T0 - 5)
        await _post(live.url, [envelope])
        await _post(live.url, [envelope])
        pages = await _pages(live.url, RequestPayload(T0 - 10, T0, FULL_BLOOM, 0), sym_key)
        assert [e.rlp for p in pages for e in p.envelopes] == [envelope.rlp]
        assert pages[-1].completion.last_hash == envelope.hash
        metrics = live.service.metrics
        assert (metrics.archived, metrics.duplicates, metrics.served) == (1, 1, 1)


@pytest.mark.parametrize("limit", [1, 7, 1000])
async def test_paging_returns_each_envelope_once(
    run_archive: RunArchive, sym_key: bytes, limit: int
) -> None:
    """Across pages every in-range, on-topic envelope comes once, oldest first, no others."""
    wanted, others = _dataset()
    async with run_archive() as live:
        await _post(live.url, wanted + others)
        payload = RequestPayload(LOWER, UPPER, topic_to_bloom(TOPIC_A), limit)
        pages = await _pages(live.url, payload, sym_key)
    received = [e.hash for page in pages for e in page.envelopes]
    expected = [e.hash for e in sorted(wanted, key=lambda e: (e.created, e.hash))]
    assert received == expected
    full, rest = divmod(len(wanted), limit)
    assert len(pages) == full + 1  # a full last page still returns a cursor (§2.11)
    assert all(len(p.envelopes) == limit and p.completion.cursor for p in pages[:full])
    assert len(pages[-1].envelopes) == rest and pages[-1].completion.cursor == b""


async def test_exact_topics_request(run_archive: RunArchive, sym_key: bytes) -> None:
    """With Topics in the request only that topic comes back, paged by 50."""
    wanted, others = _dataset()
    async with run_archive() as live:
        await _post(live.url, wanted + others)
        payload = RequestPayload(0, 0, b"", 50, topics=(TOPIC_B,))
        pages = await _pages(live.url, payload, sym_key)
    received = {e.hash for page in pages for e in page.envelopes}
    assert received == {e.hash for e in others if e.topic == TOPIC_B}


def _bad_request(key: bytes, payload: bytes, signing_key: bytes | None = b"\x44" * 32) -> Envelope:
    return seal_request(
        payload,
        sym_key=key,
        signing_key=signing_key,
        padding=bytes(padding_length(len(payload), signing_key is not None)),
        aes_nonce=bytes(range(12)),
        now=T0,
    )


def _payload(**fields: object) -> bytes:
    values: dict[str, object] = {"lower": 0, "upper": T0, "bloom": FULL_BLOOM, "limit": 10}
    values.update(fields)
    return encode_payload(RequestPayload(**values))  # type: ignore[arg-type]


BAD_REQUESTS = [
    (
        "wrong key",
        sym_key_from_password("not the password"),
        _payload(),
        b"\x44" * 32,
        errors.DECRYPT_FAILED,
        "decrypt",
    ),
    ("unsigned", None, _payload(), None, errors.WRONG_SIGNATURE, "signature"),
    (
        "bad RLP",
        None,
        b"\xf8\x01\x02",
        b"\x44" * 32,
        errors.DECODE_FAILED + "non-canonical size information (long form for a short item)",
        "decode",
    ),
    (
        "bloom of 10 bytes",
        None,
        _payload(bloom=b"hohohohoho"),
        b"\x44" * 32,
        errors.BLOOM_SIZE,
        "bloom",
    ),
    (
        "upper < lower",
        None,
        _payload(lower=T0, upper=T0 - 1),
        b"\x44" * 32,
        errors.RANGE_INVALID,
        "range",
    ),
    ("limit 1001", None, _payload(limit=1001), b"\x44" * 32, errors.LIMIT_TOO_LARGE, "limit"),
]


@pytest.mark.parametrize(
    ("key", "payload", "signer", "text", "reason"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
async def test_bad_requests_are_refused(
    run_archive: RunArchive,
    sym_key: bytes,
    key: bytes | None,
    payload: bytes,
    signer: bytes | None,
    text: str,
    reason: str,
) -> None:
    """Each bad request gets an ERROR= completion with its text; the archive is unchanged."""
    async with run_archive() as live:
        await _post(live.url, [_env(T0 - 5, tag=i) for i in range(3)])
        before = _stored(live)
        request = _bad_request(key or sym_key, payload, signer)
        async with ArchiveClient.connect(live.url) as client:
            reply = await client.send_request(request)
        assert reply.envelopes == []
        assert reply.completion.request_id == request.hash
        assert reply.completion.error == text
        assert _stored(live) == before
        assert live.service.metrics.refused_requests == {reason: 1}
        assert live.service.metrics.archived == 3


async def test_requests_too_often(run_archive: RunArchive, sym_key: bytes) -> None:
    """Within min_request_interval a second request is refused; after it, served again."""
    async with run_archive(min_request_interval=30.0) as live:
        await _post(live.url, [_env(T0 - 5)])
        before = _stored(live)
        payload = RequestPayload(0, T0, FULL_BLOOM, 10)
        async with ArchiveClient.connect(live.url) as client:
            first = await client.request(payload, sym_key)
            live.clock.now += 10
            second = await client.request(payload, sym_key)
            live.clock.now += 21
            third = await client.request(payload, sym_key)
        assert (first.completion.error, len(first.envelopes)) == (None, 1)
        assert second.completion.error == errors.RATE_LIMITED and second.envelopes == []
        assert (third.completion.error, len(third.envelopes)) == (None, 1)
        assert _stored(live) == before
        assert live.service.metrics.refused_requests == {"rate": 1}


async def _raw_exchange(url: str, frame: bytes) -> list[packets.Packet]:
    """Send one frame and return every packet up to and including the 0x7d."""
    received = []
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        await ws.send_bytes(frame)
        while True:
            packet = packets.decode_packet(await ws.receive_bytes())
            received.append(packet)
            if packet.code == packets.REQUEST_COMPLETE:
                return received


@pytest.mark.parametrize(("batch", "frames"), [(True, 2), (False, 3)])
async def test_batch_flag_and_bare_envelopes(
    run_archive: RunArchive, sym_key: bytes, batch: bool, frames: int
) -> None:
    """Batch=true bundles (limit-th alone, bare); Batch=false sends one bare envelope each."""
    envelopes = [_env(T0 - 5, tag=i) for i in range(3)]
    async with run_archive() as live:
        await _post(live.url, envelopes)
        payload = encode_payload(RequestPayload(0, T0, FULL_BLOOM, 3, batch=batch), 6)
        request = _bad_request(sym_key, payload)
        got = await _raw_exchange(
            live.url, packets.encode_packet_raw(packets.P2P_REQUEST, request.rlp)
        )
    messages = [p for p in got if p.code == packets.P2P_MESSAGE]
    assert len(messages) == frames
    last = rlp.as_list(messages[-1].payload, "bare")
    assert isinstance(last[0], bytes)  # a bare envelope, not a list of them
    hashes = [e.hash for p in messages for e in packets.envelopes_of_p2p_message(p.payload)]
    assert sorted(hashes) == sorted(e.hash for e in envelopes)


async def test_refused_envelopes_are_listed(run_archive: RunArchive) -> None:
    """Old and future envelopes are listed in the receipt with code 1 and not archived."""
    async with run_archive() as live:
        old, future, good = _env(T0 - 500, ttl=100), _env(T0 + 60), _env(T0)
        async with ArchiveClient.connect(live.url) as client:
            refused = await client.post([old, future, good])
        assert [(e.hash, e.code, e.description) for e in refused] == [
            (old.hash, 1, errors.VERY_OLD),
            (future.hash, 1, errors.FROM_FUTURE),
        ]
        assert [raw for _, raw in _stored(live)] == [good.rlp]
        assert live.service.metrics.refused_envelopes == {"very_old": 1, "future": 1}


async def test_retention_deletes_old_envelopes(run_archive: RunArchive, sym_key: bytes) -> None:
    """Retention deletes envelopes created more than retention_days ago, keeps the rest."""
    async with run_archive(retention_days=1) as live:
        old, recent = _env(T0 - 2 * 86400, ttl=3 * 86400), _env(T0 - 3600)
        await _post(live.url, [old, recent])
        assert await live.service.run_retention() == 1
        assert [raw for _, raw in _stored(live)] == [recent.rlp]
        assert live.service.metrics.expired_deleted == 1


async def test_archive_survives_clean_restart(run_archive: RunArchive, sym_key: bytes) -> None:
    """Envelopes posted before a restart are served after it from the same file."""
    envelopes = [_env(T0 - 5, tag=i) for i in range(5)]
    async with run_archive() as live:
        await _post(live.url, envelopes)
    async with run_archive() as live:
        pages = await _pages(live.url, RequestPayload(0, T0, FULL_BLOOM, 0), sym_key)
    assert {e.hash for p in pages for e in p.envelopes} == {e.hash for e in envelopes}


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"\xc3\x01\x02", aiohttp.WSCloseCode.PROTOCOL_ERROR),
        (
            packets.encode_packet(packets.MESSAGES, b"not a list"),
            aiohttp.WSCloseCode.PROTOCOL_ERROR,
        ),
    ],
)
async def test_malformed_packets_close_1002(
    run_archive: RunArchive, frame: bytes, code: int
) -> None:
    """A frame that is not [code, payload], or a Messages payload not a list, closes 1002."""
    async with (
        run_archive() as live,
        aiohttp.ClientSession() as session,
        session.ws_connect(live.url) as ws,
    ):
        await ws.send_bytes(frame)
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert ws.close_code == code


async def test_text_frames_close_and_unknown_codes_are_ignored(run_archive: RunArchive) -> None:
    """Unknown packet codes are skipped (EIP-627); a text frame closes with 1003."""
    async with (
        run_archive() as live,
        aiohttp.ClientSession() as session,
        session.ws_connect(live.url) as ws,
    ):
        await ws.send_bytes(packets.encode_packet(0x42, b"whatever"))
        assert await ArchiveClient(ws).post([_env(T0)]) == []  # still served after it
        await ws.send_str("hello")
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert ws.close_code == aiohttp.WSCloseCode.UNSUPPORTED_DATA


async def test_shutdown_closes_archive_sockets(run_archive: RunArchive) -> None:
    """Stopping the app closes open archive connections with 1001 (going away)."""
    async with aiohttp.ClientSession() as session:
        async with run_archive() as live:
            ws = await session.ws_connect(live.url)
            assert await ArchiveClient(ws).post([_env(T0)]) == []
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert msg.data == aiohttp.WSCloseCode.GOING_AWAY
        await ws.close()


@pytest.mark.parametrize("form", [5, 6, 7])
async def test_every_payload_form_is_served(
    run_archive: RunArchive, sym_key: bytes, form: int
) -> None:
    """The spec's 5-field form and status-go's 6- and 7-field forms are all answered."""
    envelope = _env(T0 - 5)
    async with run_archive() as live:
        await _post(live.url, [envelope])
        async with ArchiveClient.connect(live.url) as client:
            reply = await client.request(
                RequestPayload(T0 - 5, T0 - 5, topic_to_bloom(TOPIC_A), 0),
                sym_key,
                form=form,  # type: ignore[arg-type]
            )
    assert [e.hash for e in reply.envelopes] == [envelope.hash]
    assert reply.completion.error is None and reply.completion.cursor == b""
