"""The pure core: ingest rules, request checks, paging, rate limiting, purity."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pigeonhole.archive as archive_pkg
from pigeonhole.archive import errors, rlp
from pigeonhole.archive.bloom import FULL_BLOOM, topic_to_bloom
from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.envelopes import Envelope, keccak256, seal
from pigeonhole.archive.errors import RequestRefused
from pigeonhole.archive.limiter import RateLimiter
from pigeonhole.archive.mailserver import Mailserver, item_hash
from pigeonhole.archive.messages import (
    build_plaintext,
    padding_length,
    public_key,
    recover_signer,
    sign,
    sym_key_from_password,
)
from pigeonhole.archive.query import envelope_key, key_range, paginate
from pigeonhole.archive.requests import (
    Query,
    RequestPayload,
    encode_payload,
    seal_request,
    to_query,
)

PURE_MODULES = [
    "rlp",
    "envelopes",
    "bloom",
    "messages",
    "requests",
    "query",
    "packets",
    "errors",
    "limiter",
    "mailserver",
    "config",
    "metrics",
]
IO_MODULES = {"asyncio", "sqlite3", "aiohttp", "socket", "websockets", "threading"}
NOW = 1_700_000_000
KEY = sym_key_from_password("status-offline-inbox")
TOPIC_A = bytes.fromhex("1f7ea17f")
TOPIC_B = bytes.fromhex("01020300")


@pytest.mark.parametrize("name", PURE_MODULES)
def test_pure_modules_import_no_io(name: str) -> None:
    """The sans-I/O modules import no asyncio, sqlite3, aiohttp, socket or threads."""
    path = Path(archive_pkg.__file__).with_name(f"{name}.py")
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & IO_MODULES


def _server(**overrides: object) -> Mailserver:
    config = ArchiveConfig(**{"min_pow": 0.0, **overrides})  # type: ignore[arg-type]
    return Mailserver(config, KEY)


def _env(sent: int, ttl: int = 100, topic: bytes = TOPIC_A, data: bytes = b"x") -> Envelope:
    return Envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=0)


# -- ingest -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("envelope", "text", "code"),
    [
        (_env(NOW + 11), errors.FROM_FUTURE, errors.CODE_TIME_NOT_SYNCED),
        (_env(NOW - 200, ttl=100), errors.VERY_OLD, errors.CODE_TIME_NOT_SYNCED),
        (_env(NOW - 110, ttl=100), errors.EXPIRED, errors.CODE_TIME_NOT_SYNCED),
        (_env(NOW, data=bytes(2000)), errors.TOO_LARGE, errors.CODE_OTHER),
    ],
)
def test_ingest_refusals(envelope: Envelope, text: str, code: int) -> None:
    """Future, very old, expired and too-large envelopes are refused with their text."""
    server = _server(max_envelope_size=1024)
    ingest = server.ingest([rlp.decode(envelope.rlp)], NOW)
    assert ingest.accepted == []
    assert [(e.hash, e.description, e.code) for e in ingest.refused] == [
        (envelope.hash, text, code)
    ]


def test_ingest_low_pow() -> None:
    """An envelope below the minimum PoW is refused; sealed to it, it is accepted."""
    server = _server(min_pow=0.2)
    weak = _env(NOW)
    assert weak.pow() < 0.2
    assert server.ingest([rlp.decode(weak.rlp)], NOW).refused[0].description == errors.LOW_POW
    strong = seal(expiry=NOW + 100, ttl=100, topic=TOPIC_A, data=b"x", target_pow=0.2)
    assert server.ingest([rlp.decode(strong.rlp)], NOW).accepted == [strong]


def test_ingest_slightly_ahead_is_accepted() -> None:
    """Within the 10 s allowance an envelope from the future is accepted (§1.2)."""
    envelope = _env(NOW + 10)
    assert _server().ingest([rlp.decode(envelope.rlp)], NOW).accepted == [envelope]


def test_ingest_accept_expired_for_imports() -> None:
    """With accept_expired, back-dated envelopes are archived; the future still is not."""
    server = _server(accept_expired=True)
    old, future = _env(NOW - 10**6), _env(NOW + 100)
    ingest = server.ingest([rlp.decode(old.rlp), rlp.decode(future.rlp)], NOW)
    assert ingest.accepted == [old]
    assert [e.description for e in ingest.refused] == [errors.FROM_FUTURE]


def test_ingest_invalid_item_and_batch_hash() -> None:
    """A non-envelope item is listed as invalid; the batch hash is keccak of the payload."""
    good = _env(NOW)
    payload: list[rlp.Item] = [rlp.decode(good.rlp), [b"\x01"]]
    ingest = _server().ingest(payload, NOW)
    assert ingest.accepted == [good]
    assert ingest.refused[0].description.startswith(errors.INVALID_ENVELOPE)
    assert ingest.refused[0].hash == keccak256(rlp.encode([b"\x01"]))
    assert ingest.batch_hash == keccak256(rlp.encode(payload))


# -- requests -------------------------------------------------------------------------


def _request(
    payload_rlp: bytes, key: bytes = KEY, signing_key: bytes | None = b"\x22" * 32
) -> rlp.Item:
    envelope = seal_request(
        payload_rlp,
        sym_key=key,
        signing_key=signing_key,
        padding=bytes(padding_length(len(payload_rlp), signing_key is not None)),
        aes_nonce=bytes(12),
        now=NOW,
    )
    return rlp.decode(envelope.rlp)


def _refusal(server: Mailserver, item: rlp.Item) -> str:
    with pytest.raises(RequestRefused) as info:
        server.open_request(item, "peer", NOW)
    return info.value.message


def _payload(**fields: object) -> bytes:
    values: dict[str, object] = {"lower": NOW - 100, "upper": NOW, "bloom": FULL_BLOOM, "limit": 10}
    values.update(fields)
    return encode_payload(RequestPayload(**values))  # type: ignore[arg-type]


def test_valid_request_gives_query() -> None:
    """A signed, well-formed request opens to its query."""
    query = _server().open_request(_request(_payload()), "peer", NOW)
    assert (query.lower, query.upper, query.limit, query.batch) == (NOW - 100, NOW, 10, True)


@pytest.mark.parametrize(
    ("item", "text"),
    [
        (_request(_payload(), key=sym_key_from_password("wrong")), errors.DECRYPT_FAILED),
        (_request(_payload(), signing_key=None), errors.WRONG_SIGNATURE),
        (_request(b"\xc8\x01"), errors.DECODE_FAILED + "value size exceeds available input length"),
        (_request(_payload(bloom=bytes(10))), errors.BLOOM_SIZE),
        (_request(_payload(bloom=b"")), errors.BLOOM_EMPTY),
        (_request(_payload(lower=NOW, upper=NOW - 1)), errors.RANGE_INVALID),
        (_request(_payload(limit=1001)), errors.LIMIT_TOO_LARGE),
        (_request(_payload(cursor=bytes(35))), errors.CURSOR_SIZE),
        (_request(_payload(topics=(b"abc",))), errors.TOPIC_SIZE),
        ([b"not", b"an envelope"], errors.INVALID_REQUEST + "envelope: expected 5 fields, got 2"),
    ],
)
def test_request_refusals(item: rlp.Item, text: str) -> None:
    """Each bad request is refused with its documented text."""
    assert _refusal(_server(), item) == text


def test_request_pow_checked_when_configured() -> None:
    """With min_request_pow set, a request below it gets "PoW too low"."""
    assert _refusal(_server(min_request_pow=1.0), _request(_payload())) == errors.POW_TOO_LOW


def test_upper_zero_and_limit_zero_defaults() -> None:
    """Upper 0 means now + 60 s; Limit 0 means the default limit (§2.4)."""
    query = to_query(RequestPayload(lower=0, upper=0, bloom=FULL_BLOOM, limit=0), NOW, 1000, 1000)
    assert (query.upper, query.limit) == (NOW + 60, 1000)


def test_rate_limit_refuses_and_does_not_reset() -> None:
    """A second request within the interval is refused; a refusal does not restart it."""
    server = _server(min_request_interval=10)
    item = _request(_payload())
    server.open_request(item, "peer", NOW)
    with pytest.raises(RequestRefused, match=errors.RATE_LIMITED):
        server.open_request(item, "peer", NOW + 5)
    server.open_request(item, "other peer", NOW + 5)
    server.open_request(item, "peer", NOW + 10.5)


def test_invalid_request_does_not_use_the_rate_slot() -> None:
    """Validation runs before the rate limit, as in status-go, so a bad request costs nothing."""
    server = _server(min_request_interval=10)
    with pytest.raises(RequestRefused):
        server.open_request(_request(_payload(limit=5000)), "peer", NOW)
    server.open_request(_request(_payload()), "peer", NOW)


def test_limiter_sweep() -> None:
    """Sweeping forgets peers whose last request is older than the interval."""
    limiter = RateLimiter(5)
    assert limiter.allow("a", 0) and limiter.allow("b", 4)
    limiter.sweep(7)
    assert len(limiter) == 1


def test_signature_v_27_accepted() -> None:
    """EIP-627 prose says V is 27/28; such a signature recovers the same key."""
    digest = keccak256(b"hello")
    signature = sign(b"\x33" * 32, digest)
    legacy = signature[:64] + bytes([signature[64] + 27])
    assert recover_signer(legacy, digest) == public_key(b"\x33" * 32)
    assert recover_signer(signature[:64] + b"\x05", digest) is None


def test_unsigned_plaintext_layout() -> None:
    """Unsigned: flags carry only the size length; padding fills to 256."""
    plain = build_plaintext(b"abc", bytes(padding_length(3, False)), None)
    assert (len(plain), plain[0], plain[1]) == (256, 0x01, 3)


# -- paging ------------------------------------------------------------------------------


def _rows(envelopes: list[Envelope]) -> list[tuple[bytes, bytes]]:
    return sorted((envelope_key(e), e.rlp) for e in envelopes)


def _query(lower: int, upper: int, limit: int, cursor: bytes = b"", **kw: object) -> Query:
    payload = RequestPayload(
        lower=lower, upper=upper, bloom=FULL_BLOOM, limit=limit, cursor=cursor, **kw
    )  # type: ignore[arg-type]
    return to_query(payload, NOW, 1000, 1000)


def _select(rows: list[tuple[bytes, bytes]], query: Query) -> list[tuple[bytes, bytes]]:
    keys = key_range(query)
    return [
        (k, v)
        for k, v in rows
        if k >= keys.start
        and (keys.end is None or k < keys.end)
        and (keys.after is None or k > keys.after)
    ]


def test_pagination_limit_like_status_go() -> None:
    """TestRequestPaginationLimit: 10 envelopes, limit 6 -> 6 oldest + cursor, then 4."""
    envelopes = [_env(NOW - age, data=bytes([age])) for age in range(10, 0, -1)]
    rows = _rows(envelopes)
    first = paginate(_select(rows, _query(NOW - 10, NOW, 6)), _query(NOW - 10, NOW, 6), 1 << 20)
    sent = [raw for bundle in first.bundles for raw in bundle]
    assert sent == [e.rlp for e in envelopes[:6]]
    assert first.cursor == envelope_key(envelopes[5])[:36]
    assert first.last_hash == envelopes[5].hash
    assert [len(b) for b in first.bundles] == [5, 1]  # the limit-th travels alone
    second_q = _query(NOW - 10, NOW, 6, cursor=first.cursor)
    second = paginate(_select(rows, second_q), second_q, 1 << 20)
    assert [raw for b in second.bundles for raw in b] == [e.rlp for e in envelopes[6:]]
    assert second.cursor == b""


def test_range_is_inclusive_and_bloom_filters() -> None:
    """TestMailServer: [birth-1, birth+1] finds it, [birth+1, birth+1] does not."""
    envelope = _env(NOW)
    rows = _rows([envelope])
    around, exact = _query(NOW - 1, NOW + 1, 10), _query(NOW, NOW, 10)
    assert paginate(_select(rows, around), around, 1 << 20).count == 1
    assert paginate(_select(rows, exact), exact, 1 << 20).count == 1
    empty = _select(rows, _query(NOW + 1, NOW + 1, 10))
    assert empty == []
    other = to_query(RequestPayload(NOW - 1, NOW + 1, topic_to_bloom(TOPIC_B), 10), NOW, 10, 10)
    assert paginate(rows, other, 1 << 20).count == 0


def test_exact_topics_win_over_bloom() -> None:
    """With Topics (7-field form) only exact topics match, whatever the bloom says."""
    a, b = _env(NOW, topic=TOPIC_A), _env(NOW, topic=TOPIC_B)
    query = _query(NOW, NOW, 10, topics=(TOPIC_B,))
    page = paginate(_rows([a, b]), query, 1 << 20)
    assert page.bundles == [[b.rlp]]


def test_bundles_stay_under_the_size_limit() -> None:
    """Bundles are cut so their envelopes' bytes stay under max_batch_bytes."""
    envelopes = [_env(NOW, data=bytes([i]) * 100) for i in range(20)]
    page = paginate(_rows(envelopes), _query(NOW, NOW, 1000), 500)
    assert sum(len(b) for b in page.bundles) == 20
    assert all(sum(len(raw) for raw in bundle) < 500 for bundle in page.bundles)
    assert page.cursor == b""


def test_cursor_when_exactly_limit_matched() -> None:
    """A cursor comes back when exactly `limit` matched, even if nothing follows (§2.11)."""
    envelopes = [_env(NOW, data=bytes([i])) for i in range(3)]
    page = paginate(_rows(envelopes), _query(NOW, NOW, 3), 1 << 20)
    assert page.count == 3 and len(page.cursor) == 36


def test_key_range_at_uint32_max() -> None:
    """Upper = 2**32 - 1 reads to the end (Go wrapped Upper + 1 to an empty range)."""
    assert key_range(_query(0, 2**32 - 1, 10)).end is None


def test_item_hash_is_envelope_hash() -> None:
    """The request id of an envelope item is its envelope hash."""
    envelope = _env(NOW)
    assert item_hash(rlp.decode(envelope.rlp)) == envelope.hash


def test_documented_frames() -> None:
    """The frames shown in docs/archive.md are the ones the code builds."""
    from pigeonhole.archive import packets

    envelope = Envelope(expiry=0, ttl=1, topic=bytes(4), data=bytes.fromhex("deadbeef"), nonce=276)
    payload = rlp.encode_raw_list([envelope.rlp])
    assert packets.encode_packet_raw(packets.MESSAGES, payload).hex() == (
        "d201d0cf8001840000000084deadbeef820114"
    )
    ack = packets.encode_packet(
        packets.MESSAGE_RESPONSE, packets.message_response(keccak256(payload), [])
    )
    assert ack.hex() == (
        "e60ce401e2a02e7d466fee287d2e046f09407cd83db5767dfe30d9c72863e07f7b987c3b25d9c0"
    )
    assert packets.p2p_message_frame([envelope.rlp]).hex() == (
        "d17fcf8001840000000084deadbeef820114"
    )
    error = packets.encode_packet(
        packets.REQUEST_COMPLETE, packets.error_payload(bytes(32), errors.RATE_LIMITED)
    )
    assert error.hex() == (
        "f83c7db8394552524f523d" + "00" * 32 + errors.RATE_LIMITED.encode().hex()
    )


def _raw(lower: int, upper: int, tail: bytes = b"") -> bytes:
    return lower.to_bytes(4, "big") + upper.to_bytes(4, "big") + tail


def test_raw_requests_only_when_enabled() -> None:
    """The raw layout is refused as bad RLP unless raw_requests is on."""
    item = _request(_raw(NOW - 10, NOW))
    assert _refusal(_server(), item).startswith(errors.DECODE_FAILED)
    query = _server(raw_requests=True).open_request(item, "peer", NOW)
    assert (query.lower, query.upper, query.bloom, query.batch) == (
        NOW - 10,
        NOW,
        FULL_BLOOM,
        False,
    )


def test_raw_request_limit_cursor_and_range_checks() -> None:
    """Raw: limit at 72..76, first 36 bytes of a 40-byte cursor, from > to, 24 h cap."""
    server = _server(raw_requests=True)
    cursor = bytes(range(40))
    tail = topic_to_bloom(TOPIC_A) + (7).to_bytes(4, "big") + cursor
    query = server.open_request(_request(_raw(NOW - 10, NOW, tail)), "peer", NOW)
    assert (query.limit, query.cursor) == (7, cursor[:36])
    assert _refusal(server, _request(_raw(NOW, NOW - 1))) == (
        f"query range is invalid: from > to ({NOW} > {NOW - 1})"
    )
    # TestMailServer: [0, birth + 24] in the raw format fails (range over 24 hours)
    assert _refusal(server, _request(_raw(0, NOW + 24))) == "query range too big for peer peer"
