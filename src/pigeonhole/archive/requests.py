"""The historic-messages request payload and the rules that turn it into a query.

Three RLP forms are read (notes §2.3 A):

- 5 fields, the spec's: `[Lower, Upper, Bloom, Limit, Cursor]` (Batch taken as true);
- 6 fields, status-go 2018-12 to 2020-01: `[Lower, Upper, Bloom, Limit, Cursor, Batch]`;
- 7 fields, status-go from 2020-01: `[Lower, Upper, Bloom, Topics, Limit, Cursor, Batch]`;
- and, when enabled, status-go's raw binary layout as a fallback (`decode_raw_payload`).

Then, in status-go's order: Upper 0 means now + 60 s; Upper < Lower is refused; Limit 0
means the default; then the bloom, limit, cursor and topic checks. Pure: `now` is passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pigeonhole.archive import errors, rlp
from pigeonhole.archive.bloom import BLOOM_SIZE, FULL_BLOOM
from pigeonhole.archive.envelopes import DEFAULT_TTL, TOPIC_LENGTH, Envelope, seal
from pigeonhole.archive.messages import build_plaintext, encrypt_symmetric

#: status-go `whisperTTLSafeThreshold`: an Upper of 0 means "until now + 60 s"
UPPER_DEFAULT_MARGIN = 60
CURSOR_LENGTH = 36
KEY_LENGTH = 40
PayloadForm = Literal[5, 6, 7]


@dataclass(frozen=True)
class RequestPayload:
    """The decoded payload, before defaults and validation."""

    lower: int
    upper: int
    bloom: bytes
    limit: int
    cursor: bytes = b""
    topics: tuple[bytes, ...] = ()
    batch: bool = True


@dataclass(frozen=True)
class Query:
    """A validated request: inclusive [lower, upper] on creation seconds."""

    lower: int
    upper: int
    bloom: bytes
    topics: frozenset[bytes]
    limit: int
    cursor: bytes
    batch: bool


def encode_payload(payload: RequestPayload, form: PayloadForm = 7) -> bytes:
    """RLP of the payload in one of the three forms (7 is what Status sent last)."""
    head = [rlp.encode_uint(payload.lower), rlp.encode_uint(payload.upper), payload.bloom]
    tail = [rlp.encode_uint(payload.limit), payload.cursor]
    if form == 5:
        return rlp.encode([*head, *tail])
    batch = rlp.encode_bool(payload.batch)
    if form == 6:
        return rlp.encode([*head, *tail, batch])
    return rlp.encode([*head, list(payload.topics), *tail, batch])


def decode_payload(data: bytes) -> RequestPayload:
    """Read any of the three forms; RlpError says what is wrong."""
    fields = rlp.as_list(rlp.decode(data), "request")
    if len(fields) not in (5, 6, 7):
        raise rlp.RlpError(f"request: expected 5, 6 or 7 fields, got {len(fields)}")
    topics: tuple[bytes, ...] = ()
    if len(fields) == 7:
        items = rlp.as_list(fields.pop(3), "request Topics")
        topics = tuple(rlp.as_bytes(t, "request Topics") for t in items)
    return RequestPayload(
        lower=rlp.as_uint(fields[0], "request Lower", 32),
        upper=rlp.as_uint(fields[1], "request Upper", 32),
        bloom=rlp.as_bytes(fields[2], "request Bloom"),
        limit=rlp.as_uint(fields[3], "request Limit", 32),
        cursor=rlp.as_bytes(fields[4], "request Cursor"),
        topics=topics,
        batch=rlp.as_bool(fields[5], "request Batch") if len(fields) > 5 else True,
    )


def decode_raw_payload(data: bytes) -> RequestPayload:
    """status-go's raw binary fallback (`validateRequest`, notes §2.3 A).

    `BE32 Lower ‖ BE32 Upper ‖ [Bloom(64) ‖ [BE32 Limit ‖ [Cursor(40)]]]`; 8 bytes alone
    mean the full-node bloom. Batch is false on this path. Of a 40-byte cursor the first
    36 bytes are used (Go silently ignored it, notes §2.11).

    Raises:
        RequestRefused: undersized payload or bloom, or Upper < Lower.
    """
    if len(data) < 8:
        raise errors.RequestRefused("decode", errors.RAW_UNDERSIZED)
    if len(data) == 8:
        bloom = FULL_BLOOM
    elif len(data) < 8 + BLOOM_SIZE:
        raise errors.RequestRefused("bloom", errors.RAW_UNDERSIZED_BLOOM)
    else:
        bloom = data[8 : 8 + BLOOM_SIZE]
    lower, upper = int.from_bytes(data[0:4], "big"), int.from_bytes(data[4:8], "big")
    if upper < lower:
        raise errors.RequestRefused("range", errors.RAW_RANGE_INVALID.format(lower, upper))
    limit_at = 8 + BLOOM_SIZE
    limit = int.from_bytes(data[limit_at : limit_at + 4], "big") if len(data) >= 76 else 0
    cursor = data[76 : 76 + CURSOR_LENGTH] if len(data) == 76 + KEY_LENGTH else b""
    return RequestPayload(lower, upper, bloom, limit, cursor, (), batch=False)


def to_query(payload: RequestPayload, now: int, default_limit: int, max_limit: int) -> Query:
    """Apply defaults and validate, in status-go's order.

    Raises:
        RequestRefused: with status-go's error text (or ours, for the checks we added).
    """
    upper = payload.upper or now + UPPER_DEFAULT_MARGIN
    if upper < payload.lower:
        raise errors.RequestRefused("range", errors.RANGE_INVALID)
    limit = payload.limit or default_limit
    if not payload.bloom and not payload.topics:
        raise errors.RequestRefused("bloom", errors.BLOOM_EMPTY)
    # added: Go never checked the bloom's length (notes §1.5)
    if payload.bloom and len(payload.bloom) != BLOOM_SIZE:
        raise errors.RequestRefused("bloom", errors.BLOOM_SIZE)
    if limit > max_limit:
        raise errors.RequestRefused("limit", errors.LIMIT_TOO_LARGE)
    if payload.cursor and len(payload.cursor) != CURSOR_LENGTH:
        raise errors.RequestRefused("cursor", errors.CURSOR_SIZE)
    if any(len(topic) != TOPIC_LENGTH for topic in payload.topics):
        raise errors.RequestRefused("topics", errors.TOPIC_SIZE)
    return Query(
        lower=payload.lower,
        upper=upper,
        bloom=payload.bloom,
        topics=frozenset(payload.topics),
        limit=limit,
        cursor=payload.cursor,
        batch=payload.batch,
    )


def seal_request(
    payload_rlp: bytes,
    *,
    sym_key: bytes,
    signing_key: bytes | None,
    padding: bytes,
    aes_nonce: bytes,
    now: int,
    ttl: int = DEFAULT_TTL,
    target_pow: float = 0.0,
) -> Envelope:
    """The request envelope a client sends on 0x7e: signed, encrypted, sealed.

    Topic 00000000 and Expiry = now + TTL, as in the notes' worked example (§3.4);
    randomness (padding, AES nonce, the signing key) is passed in.
    """
    plaintext = build_plaintext(payload_rlp, padding, signing_key)
    data = encrypt_symmetric(sym_key, plaintext, aes_nonce)
    return seal(
        expiry=now + ttl, ttl=ttl, topic=bytes(TOPIC_LENGTH), data=data, target_pow=target_pow
    )
