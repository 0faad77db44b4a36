"""Whisper v6 envelopes (EIP-627): the RLP list `[Expiry, TTL, Topic, Data, Nonce]`.

The hash is Keccak-256 (Ethereum's, not NIST SHA3-256) of the envelope's RLP. Proof of
work is the EIP-627 rule as go-ethereum >= 1.9 and status-go compute it: leading zero bits
of keccak256(RLP([Expiry, TTL, Topic, Data]) ‖ BE64(Nonce)), divided by the length of that
short RLP and by the TTL (notes §1.3). Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from Crypto.Hash import keccak

from pigeonhole.archive import rlp

TOPIC_LENGTH = 4
HASH_LENGTH = 32
#: EIP-627 `EnvelopeHeaderLength`: size() = 20 + len(Data), the unit of the size limit
ENVELOPE_HEADER_LENGTH = 20
#: EIP-627 `DefaultTTL`, seconds
DEFAULT_TTL = 50
_UINT32 = 0xFFFFFFFF
_MAX_NONCE = 2**64 - 1


def keccak256(data: bytes) -> bytes:
    """Ethereum's Keccak-256 (pre-standard padding); differs from hashlib.sha3_256."""
    return keccak.new(digest_bits=256, data=data).digest()


def parse_topic(text: str) -> bytes:
    """A topic from 8 hex digits, with or without a 0x prefix."""
    digits = text[2:] if text[:2].lower() == "0x" else text
    try:
        topic = bytes.fromhex(digits)
    except ValueError as err:
        raise ValueError(f"topic {text!r} is not hex") from err
    if len(topic) != TOPIC_LENGTH:
        raise ValueError(f"topic {text!r} must be 4 bytes (8 hex digits)")
    return topic


def bytes_to_topic(data: bytes) -> bytes:
    """Go's BytesToTopic: the first 4 bytes, zero-filled when shorter."""
    return data[:TOPIC_LENGTH].ljust(TOPIC_LENGTH, b"\x00")


@dataclass(frozen=True)
class Envelope:
    """One Whisper envelope; `rlp` and `hash` are derived once and cached."""

    expiry: int
    ttl: int
    topic: bytes
    data: bytes
    nonce: int
    rlp: bytes = field(init=False, repr=False, compare=False)
    hash: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (0 <= self.expiry <= _UINT32 and 0 <= self.ttl <= _UINT32):
            raise ValueError("expiry and ttl are uint32")
        if not 0 <= self.nonce <= _MAX_NONCE:
            raise ValueError("nonce is uint64")
        if len(self.topic) != TOPIC_LENGTH:
            raise ValueError("topic must be 4 bytes")
        raw = rlp.encode([*self._short_fields(), rlp.encode_uint(self.nonce)])
        object.__setattr__(self, "rlp", raw)
        object.__setattr__(self, "hash", keccak256(raw))

    @property
    def created(self) -> int:
        """Creation time `Expiry - TTL` in uint32 arithmetic (notes §2.2: it wraps)."""
        return (self.expiry - self.ttl) & _UINT32

    def size(self) -> int:
        """EIP-627 size(): header length plus data, what the size limit applies to."""
        return ENVELOPE_HEADER_LENGTH + len(self.data)

    def short_rlp(self) -> bytes:
        """RLP of the envelope without its nonce: the PoW input."""
        return rlp.encode(self._short_fields())

    def pow(self, diff: int = 0) -> float:
        """EIP-627 proof of work; `diff` extends the TTL for envelopes sent slightly ahead."""
        short = self.short_rlp()
        digest = keccak256(short + self.nonce.to_bytes(8, "big"))
        return pow_value(digest, len(short), self.ttl + diff)

    def _short_fields(self) -> list[bytes]:
        return [
            rlp.encode_uint(self.expiry),
            rlp.encode_uint(self.ttl),
            self.topic,
            self.data,
        ]


def pow_value(digest: bytes, size: int, ttl: int) -> float:
    """2**(leading zero bits of digest) / size / ttl, in float64 like Go (ttl 0 -> +inf)."""
    if ttl == 0:
        return math.inf
    zeros = 256 - int.from_bytes(digest, "big").bit_length()
    return float(2**zeros) / float(size) / float(ttl)


def decode_envelope(raw: bytes) -> Envelope:
    """Strictly decode one envelope; the hash is over `raw` (canonical, so equal)."""
    return envelope_from_item(rlp.decode(raw))


def envelope_from_item(item: rlp.Item) -> Envelope:
    """Build an envelope from a decoded RLP item, with Go's field checks."""
    fields = rlp.as_list(item, "envelope")
    if len(fields) != 5:
        raise rlp.RlpError(f"envelope: expected 5 fields, got {len(fields)}")
    topic = rlp.as_bytes(fields[2], "envelope Topic")
    if len(topic) != TOPIC_LENGTH:
        raise rlp.RlpError(f"envelope Topic: expected 4 bytes, got {len(topic)}")
    return Envelope(
        expiry=rlp.as_uint(fields[0], "envelope Expiry", 32),
        ttl=rlp.as_uint(fields[1], "envelope TTL", 32),
        topic=topic,
        data=rlp.as_bytes(fields[3], "envelope Data"),
        nonce=rlp.as_uint(fields[4], "envelope Nonce", 64),
    )


def seal(
    *,
    expiry: int,
    ttl: int,
    topic: bytes,
    data: bytes,
    target_pow: float,
    max_attempts: int = 1 << 24,
) -> Envelope:
    """Find the first nonce (from 0) whose PoW reaches `target_pow`.

    Raises:
        ValueError: no nonce within `max_attempts` reaches the target.
    """
    base = Envelope(expiry=expiry, ttl=ttl, topic=topic, data=data, nonce=0)
    short = base.short_rlp()
    for nonce in range(max_attempts):
        digest = keccak256(short + nonce.to_bytes(8, "big"))
        if pow_value(digest, len(short), ttl) >= target_pow:
            return Envelope(expiry=expiry, ttl=ttl, topic=topic, data=data, nonce=nonce)
    raise ValueError(f"no nonce below {max_attempts} reaches PoW {target_pow}")
