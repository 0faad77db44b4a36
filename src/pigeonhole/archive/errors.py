"""Why a request or an envelope was refused: status-go's error texts, plus ours.

A refused request is answered with a 0x7d `ERROR=` completion carrying `message`; a
refused envelope is listed in the posting receipt with `code` and `message`. `reason` is
a short, fixed label for metrics. The texts follow status-go's mailserver (notes §2.4,
§1.2) where it had one; ours are marked "added" in docs/archive.md.
"""

from __future__ import annotations

#: receipt codes, as Waku v1's EnvelopeError codes (1: clock out of sync, 2: other)
CODE_TIME_NOT_SYNCED = 1
CODE_OTHER = 2

# requests (0x7e), in the order the checks run
POW_TOO_LOW = "PoW too low"
DECRYPT_FAILED = "failed to decrypt p2p request"
WRONG_SIGNATURE = "check message signature failed: wrong signature of p2p request"
DECODE_FAILED = "failed to decode data: "
RANGE_INVALID = "query range is invalid: lower > upper"
BLOOM_EMPTY = "request is invalid: bloom filter is empty"
BLOOM_SIZE = "request is invalid: bloom filter must be 64 bytes"
LIMIT_TOO_LARGE = "request is invalid: limit exceeds the maximum allowed value"
CURSOR_SIZE = "request is invalid: cursor must be empty or 36 bytes"
TOPIC_SIZE = "request is invalid: each topic must be 4 bytes"
RATE_LIMITED = "rate limit exceeded"
INVALID_REQUEST = "invalid p2p request: "
# the raw binary fallback (status-go 2018-12 .. 2021, `validateRequest`)
RAW_UNDERSIZED = "Undersized p2p request"
RAW_UNDERSIZED_BLOOM = "Undersized bloom filter in p2p request"
RAW_RANGE_INVALID = "query range is invalid: from > to ({} > {})"
RAW_RANGE_TOO_BIG = "query range too big for peer {}"

# envelopes (0x01)
FROM_FUTURE = "envelope from future"
VERY_OLD = "very old envelope"
EXPIRED = "expired envelope"
TOO_LARGE = "huge messages are not allowed"
LOW_POW = "envelope with low PoW received"
INVALID_ENVELOPE = "invalid envelope: "
# the archive's bounds (added: status-go had none)
ADDRESS_QUOTA = "archive quota exceeded: bytes stored from your address"
SERVER_QUOTA = "archive quota exceeded: bytes stored on this server"
DISK_LOW = "archive is low on disk space: nothing new is archived now"


class RequestRefused(Exception):
    """A historic-messages request that gets an `ERROR=` completion instead of envelopes."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class EnvelopeRefused(Exception):
    """A posted envelope that is not archived; it is listed in the receipt."""

    def __init__(self, reason: str, code: int, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.message = message
