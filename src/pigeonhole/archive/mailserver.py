"""The mailserver's decisions, without I/O: which envelopes to archive, which requests to serve.

`ingest` judges a 0x01 payload envelope by envelope (Whisper's ingest rules, notes §1.2)
and returns what to store and what to report. `open_request` takes a 0x7e payload
through status-go's checks in their order (notes §2.4): request PoW, decryption,
signature, payload decoding, range, defaults and validation, then the per-peer rate
limit, and returns the query to run or raises `RequestRefused`. Time comes in as `now`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pigeonhole.archive import errors, rlp
from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.envelopes import Envelope, envelope_from_item, keccak256
from pigeonhole.archive.errors import EnvelopeRefused, RequestRefused
from pigeonhole.archive.limiter import RateLimiter
from pigeonhole.archive.messages import MessageError, open_symmetric
from pigeonhole.archive.packets import EnvelopeError
from pigeonhole.archive.requests import (
    Query,
    RequestPayload,
    decode_payload,
    decode_raw_payload,
    to_query,
)

#: Whisper's DefaultSyncAllowance, seconds of clock skew tolerated
SYNC_ALLOWANCE = 10
#: the raw request path kept status-go's 24-hour cap on the range (`maxQueryRange`)
RAW_MAX_RANGE = 24 * 3600


@dataclass(frozen=True)
class Ingest:
    """The outcome of one 0x01 packet: envelopes to store, envelopes refused."""

    batch_hash: bytes
    accepted: list[Envelope]
    refused: list[EnvelopeError]
    reasons: list[str]


def item_hash(item: rlp.Item) -> bytes:
    """keccak256 of an item's RLP: an envelope's hash, a request's id, a batch's hash."""
    return keccak256(rlp.encode(item))


class Mailserver:
    def __init__(self, config: ArchiveConfig, sym_key: bytes) -> None:
        self.config = config
        self._sym_key = sym_key
        self.limiter = RateLimiter(config.min_request_interval)

    def ingest(self, payload: rlp.Item, now: float) -> Ingest:
        """Judge every envelope of a 0x01 payload (which must be a list)."""
        items = rlp.as_list(payload, "messages")
        accepted: list[Envelope] = []
        refused: list[EnvelopeError] = []
        reasons: list[str] = []
        for item in items:
            try:
                envelope = _envelope(item)
                self.check_envelope(envelope, int(now))
            except EnvelopeRefused as err:
                refused.append(EnvelopeError(item_hash(item), err.code, err.message))
                reasons.append(err.reason)
                continue
            accepted.append(envelope)
        return Ingest(item_hash(payload), accepted, refused, reasons)

    def check_envelope(self, envelope: Envelope, now: int) -> None:
        """Whisper's `add` checks, in Go's order (future, expiry, size, PoW)."""
        sent = envelope.created
        diff = 0
        if sent > now:
            if sent - SYNC_ALLOWANCE > now:
                raise EnvelopeRefused("future", errors.CODE_TIME_NOT_SYNCED, errors.FROM_FUTURE)
            diff = sent - now + 1  # Go: PoW recomputed over the extra lifetime
        if envelope.expiry < now and not self.config.accept_expired:
            if envelope.expiry + 2 * SYNC_ALLOWANCE < now:
                raise EnvelopeRefused("very_old", errors.CODE_TIME_NOT_SYNCED, errors.VERY_OLD)
            # Whisper drops these silently; our receipt promises storage, so we say so
            raise EnvelopeRefused("expired", errors.CODE_TIME_NOT_SYNCED, errors.EXPIRED)
        if envelope.size() > self.config.max_envelope_size:
            raise EnvelopeRefused("size", errors.CODE_OTHER, errors.TOO_LARGE)
        if envelope.pow(diff) < self.config.min_pow:
            raise EnvelopeRefused("pow", errors.CODE_OTHER, errors.LOW_POW)

    def open_request(self, payload: rlp.Item, peer: str, now: float) -> Query:
        """Check a 0x7e payload and return its query; the request id is `item_hash`.

        Raises:
            RequestRefused: the reason label and the text for the ERROR= completion.
        """
        try:
            envelope = envelope_from_item(payload)
        except (rlp.RlpError, ValueError) as err:
            raise RequestRefused("invalid", errors.INVALID_REQUEST + str(err)) from err
        if self.config.min_request_pow > 0 and envelope.pow() < self.config.min_request_pow:
            raise RequestRefused("pow", errors.POW_TOO_LOW)
        try:
            message = open_symmetric(self._sym_key, envelope.data)
        except MessageError as err:
            raise RequestRefused("decrypt", errors.DECRYPT_FAILED) from err
        if message.signer is None:
            raise RequestRefused("signature", errors.WRONG_SIGNATURE)
        request = self._payload(message.payload, peer)
        query = to_query(request, int(now), self.config.default_limit, self.config.max_limit)
        if not self.limiter.allow(peer, now):
            raise RequestRefused("rate", errors.RATE_LIMITED)
        return query

    def _payload(self, data: bytes, peer: str) -> RequestPayload:
        """The RLP payload; with `raw_requests`, status-go's raw layout when it is not RLP."""
        try:
            return decode_payload(data)
        except rlp.RlpError as err:
            if not self.config.raw_requests:
                raise RequestRefused("decode", errors.DECODE_FAILED + str(err)) from err
        raw = decode_raw_payload(data)
        if raw.upper - raw.lower > RAW_MAX_RANGE:
            raise RequestRefused("range", errors.RAW_RANGE_TOO_BIG.format(peer))
        return raw


def _envelope(item: rlp.Item) -> Envelope:
    try:
        return envelope_from_item(item)
    except (rlp.RlpError, ValueError) as err:
        raise EnvelopeRefused(
            "invalid", errors.CODE_OTHER, errors.INVALID_ENVELOPE + str(err)
        ) from err
