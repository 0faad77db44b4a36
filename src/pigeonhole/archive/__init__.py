"""The archive: a Whisper-style mailserver for clients that are mostly offline.

It stores every accepted Whisper v6 envelope (EIP-627) and serves historic ones on
request, faithful to the bytes of go-ethereum and status-go (Status's Whisper mailserver
specification), over a WebSocket endpoint of our own
(`/whisper/v6`; framing in docs/archive.md).

Pure, I/O-free modules: `rlp`, `envelopes`, `bloom`, `messages`, `requests`, `query`,
`packets`, `errors`, `limiter`, `mailserver`, `config`, `metrics`. I/O: `store` (SQLite),
`writer` (group commit), `endpoint` (aiohttp server side), `client` (aiohttp client side).
"""

from __future__ import annotations

from pigeonhole.archive.bloom import FULL_BLOOM, bloom_match, topic_to_bloom, topics_to_bloom
from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.envelopes import Envelope, decode_envelope, keccak256, seal
from pigeonhole.archive.errors import EnvelopeRefused, RequestRefused
from pigeonhole.archive.mailserver import Mailserver
from pigeonhole.archive.messages import sym_key_from_password
from pigeonhole.archive.metrics import ArchiveMetrics
from pigeonhole.archive.packets import Completion, EnvelopeError
from pigeonhole.archive.requests import Query, RequestPayload

__all__ = [
    "FULL_BLOOM",
    "ArchiveConfig",
    "ArchiveMetrics",
    "Completion",
    "Envelope",
    "EnvelopeError",
    "EnvelopeRefused",
    "Mailserver",
    "Query",
    "RequestPayload",
    "RequestRefused",
    "bloom_match",
    "decode_envelope",
    "keccak256",
    "seal",
    "sym_key_from_password",
    "topic_to_bloom",
    "topics_to_bloom",
]
