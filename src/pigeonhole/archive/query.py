"""Archive keys and paging: which stored envelopes a query returns, in what bundles.

Key (status-go since 2019-05, notes §2.2): `BE32(Expiry - TTL) ‖ hash(32) ‖ topic(4)`,
40 bytes, compared bytewise, so envelopes sort by creation second, then hash. A query
reads keys in `[key(Lower), key(Upper + 1))`, ascending, oldest first; a cursor is the
first 36 bytes (time ‖ hash) of the last envelope sent, and the next page starts strictly
after that envelope (notes §2.5). `paginate` is pure: it reads rows from any iterable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pigeonhole.archive.bloom import bloom_match, topic_to_bloom
from pigeonhole.archive.envelopes import HASH_LENGTH, Envelope
from pigeonhole.archive.requests import CURSOR_LENGTH, Query

KEY_LENGTH = 40
ZERO_HASH = bytes(HASH_LENGTH)
SECONDS_PER_DAY = 86400
_UINT32 = 0xFFFFFFFF
_TopicMatch = Callable[[bytes], bool]


def db_key(created: int, envelope_hash: bytes, topic: bytes) -> bytes:
    """status-go's NewDBKey(timestamp, topic, hash).Bytes()."""
    return created.to_bytes(4, "big") + envelope_hash + topic


def envelope_key(envelope: Envelope) -> bytes:
    return db_key(envelope.created, envelope.hash, envelope.topic)


def key_hash(key: bytes) -> bytes:
    return key[4:36]


def key_topic(key: bytes) -> bytes:
    return key[36:40]


@dataclass(frozen=True)
class KeyRange:
    """Keys `start <= key < end` (no end when None) and, with a cursor, `key > after`."""

    start: bytes
    end: bytes | None
    after: bytes | None


def key_range(query: Query) -> KeyRange:
    """The stored keys a query may read (before topic filtering)."""
    start = db_key(query.lower, ZERO_HASH, b"")
    # Go computes Upper + 1 in uint32 and wraps to an empty range at 2**32 - 1; we don't
    end = None if query.upper >= _UINT32 else db_key(query.upper + 1, ZERO_HASH, b"")
    # a 40-byte key is greater than its own 36-byte prefix, so pad to skip that key too
    after = query.cursor + b"\xff" * (KEY_LENGTH - CURSOR_LENGTH) if query.cursor else None
    return KeyRange(start=start, end=end, after=after)


def retention_cutoff(now: float, days: int) -> bytes:
    """Keys below this were created more than `days` ago (status-go's cleaner range)."""
    return db_key(max(int(now) - days * SECONDS_PER_DAY, 0), ZERO_HASH, b"")


@dataclass
class Page:
    """What a request sends: bundles of raw envelopes, then the completion's fields."""

    bundles: list[list[bytes]] = field(default_factory=list)
    last_hash: bytes = ZERO_HASH
    cursor: bytes = b""
    count: int = 0


def paginate(rows: Iterable[tuple[bytes, bytes]], query: Query, max_bundle_bytes: int) -> Page:
    """status-go's processRequestInBundles over ascending (key, raw envelope) rows.

    A bundle grows while it stays under `max_bundle_bytes`. The limit-th matching
    envelope closes the page: it travels alone in the last bundle (as in Go) and its key
    becomes the cursor, even when nothing follows it (clients stop on an empty cursor).
    """
    page = Page()
    bundle: list[bytes] = []
    bundle_size = 0
    matches = _matcher(query)
    for key, raw in rows:
        if not matches(key_topic(key)):
            continue
        page.last_hash = key_hash(key)
        page.count += 1
        limit_reached = page.count >= query.limit
        if not limit_reached and bundle_size + len(raw) < max_bundle_bytes:
            bundle.append(raw)
            bundle_size += len(raw)
            continue
        if bundle:
            page.bundles.append(bundle)
        bundle, bundle_size = [raw], len(raw)
        if limit_reached:
            page.cursor = key[:CURSOR_LENGTH]
            break
    if bundle:
        page.bundles.append(bundle)
    return page


def _matcher(query: Query) -> _TopicMatch:
    """Exact topics when the request names any, else the bloom (notes §2.5 step 1)."""
    if query.topics:
        return query.topics.__contains__
    blooms: dict[bytes, bool] = {}

    def by_bloom(topic: bytes) -> bool:
        hit = blooms.get(topic)
        if hit is None:
            hit = blooms[topic] = bloom_match(query.bloom, topic_to_bloom(topic))
        return hit

    return by_bloom
