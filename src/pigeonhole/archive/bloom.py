"""Topic bloom filters, byte for byte as the Go code computes and matches them.

A bloom is 64 bytes (512 bits). `TopicToBloom` picks three bit indices from a topic and
*assigns* each one's byte (`b[i] = 1 << bit`) instead of OR-ing it in, so when two indices
fall into the same byte only the last survives (notes §1.4). Requests built by Go clients
carry that value, so matching must use it too. An envelope matches a request when every
bit of the envelope's bloom is set in the request's (notes §1.5).
"""

from __future__ import annotations

from collections.abc import Iterable

BLOOM_SIZE = 64
#: Go's MakeFullNodeBloom: matches every topic
FULL_BLOOM = b"\xff" * BLOOM_SIZE


def topic_to_bloom(topic: bytes) -> bytes:
    """Go's TopicToBloom, assignment quirk included (topic 01020300 -> byte 0 = 0x08)."""
    if len(topic) != 4:
        raise ValueError("topic must be 4 bytes")
    bloom = bytearray(BLOOM_SIZE)
    for j in range(3):
        index = topic[j] + (256 if topic[3] & (1 << j) else 0)
        bloom[index // 8] = 1 << (index % 8)  # assignment, exactly like Go
    return bytes(bloom)


def topics_to_bloom(topics: Iterable[bytes]) -> bytes:
    """A request bloom for several topics: the byte-wise OR of each one's bloom."""
    combined = bytearray(BLOOM_SIZE)
    for topic in topics:
        for i, byte in enumerate(topic_to_bloom(topic)):
            combined[i] |= byte
    return bytes(combined)


def bloom_match(request_bloom: bytes, envelope_bloom: bytes) -> bool:
    """Go's BloomFilterMatch(filter, sample): `(f | s) == f` for every byte."""
    if len(request_bloom) != len(envelope_bloom):
        return False
    # byte-wise and whole-number OR agree; the integer form is one operation
    f = int.from_bytes(request_bloom, "big")
    return f | int.from_bytes(envelope_bloom, "big") == f
