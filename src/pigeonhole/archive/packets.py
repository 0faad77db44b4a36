"""Packets on the archive's WebSocket: one binary message is RLP `[code, payload]`.

That is EIP-627's description of a Whisper packet ("an integer packet code followed by
another object"), carried over our own transport (notes §6.2). Codes and payloads:

- 0x01 Messages (client -> server): a list of envelopes to archive.
- 0x0c Message response (server -> client, after the envelopes are committed):
  `[1, [batch hash, [[envelope hash, code, description], ...]]]`, Waku v1's shape; the
  batch hash is keccak256 of the 0x01 payload's RLP; only refused envelopes are listed.
- 0x7e P2P request (client -> server): one envelope holding the encrypted request.
- 0x7f P2P message (server -> client): a list of envelopes, or one bare envelope when a
  bundle holds only one (Whisper's rule; notes §2.6).
- 0x7d Request complete (server -> client): one byte string, `requestID ‖ lastHash ‖
  cursor(0|36)` or `"ERROR=" ‖ requestID ‖ utf-8 message` (notes §2.6).

Unknown codes are ignored, as EIP-627 asks. Pure: bytes in, bytes out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pigeonhole.archive import rlp
from pigeonhole.archive.envelopes import HASH_LENGTH, Envelope, envelope_from_item

STATUS = 0x00
MESSAGES = 0x01
MESSAGE_RESPONSE = 0x0C
REQUEST_COMPLETE = 0x7D
P2P_REQUEST = 0x7E
P2P_MESSAGE = 0x7F
MESSAGE_RESPONSE_VERSION = 1
ERROR_PREFIX = b"ERROR="


@dataclass(frozen=True)
class Packet:
    code: int
    payload: rlp.Item


@dataclass(frozen=True)
class Completion:
    """A decoded 0x7d payload; `error` is set on the failure form."""

    request_id: bytes
    last_hash: bytes = bytes(HASH_LENGTH)
    cursor: bytes = b""
    error: str | None = None


@dataclass(frozen=True)
class EnvelopeError:
    """One refused envelope in a message response."""

    hash: bytes
    code: int
    description: str


def encode_packet(code: int, payload: rlp.Encodable) -> bytes:
    return rlp.encode([rlp.encode_uint(code), payload])


def encode_packet_raw(code: int, encoded_payload: bytes) -> bytes:
    """A packet whose payload is already RLP (a stored envelope, a prebuilt list)."""
    return rlp.encode_raw_list([rlp.encode(rlp.encode_uint(code)), encoded_payload])


def decode_packet(frame: bytes) -> Packet:
    """Split a frame into code and payload item; RlpError if it is not `[code, payload]`."""
    fields = rlp.as_list(rlp.decode(frame), "packet")
    if len(fields) != 2:
        raise rlp.RlpError(f"packet: expected [code, payload], got {len(fields)} fields")
    return Packet(code=rlp.as_uint(fields[0], "packet code", 64), payload=fields[1])


def p2p_message_frame(bundle: Sequence[bytes]) -> bytes:
    """A 0x7f frame: one bare envelope, or the list of them (raw envelopes in)."""
    if len(bundle) == 1:
        return encode_packet_raw(P2P_MESSAGE, bundle[0])
    return encode_packet_raw(P2P_MESSAGE, rlp.encode_raw_list(bundle))


def envelopes_of_p2p_message(payload: rlp.Item) -> list[Envelope]:
    """Read a 0x7f payload in either form (the spec says receivers must take both)."""
    items = rlp.as_list(payload, "p2p message")
    if items and isinstance(items[0], list):
        return [envelope_from_item(item) for item in items]
    return [envelope_from_item(items)]


def completion_payload(request_id: bytes, last_hash: bytes, cursor: bytes) -> bytes:
    return request_id + last_hash + cursor


def error_payload(request_id: bytes, message: str) -> bytes:
    return ERROR_PREFIX + request_id + message.encode("utf-8")


def parse_completion(data: bytes) -> Completion:
    """Read a 0x7d payload the way status-go's client does."""
    if data.startswith(ERROR_PREFIX):
        rest = data[len(ERROR_PREFIX) :]
        if len(rest) < HASH_LENGTH:
            raise ValueError("error completion shorter than a request id")
        return Completion(rest[:HASH_LENGTH], error=rest[HASH_LENGTH:].decode("utf-8", "replace"))
    if len(data) < HASH_LENGTH:
        raise ValueError("completion shorter than a request id")
    request_id, last_hash = data[:HASH_LENGTH], data[HASH_LENGTH : 2 * HASH_LENGTH]
    cursor = data[2 * HASH_LENGTH :]
    # status-go's client: a remainder shorter than a cursor is not a cursor
    return Completion(
        request_id, last_hash or bytes(HASH_LENGTH), cursor if len(cursor) >= 36 else b""
    )


def message_response(batch_hash: bytes, refused: Sequence[EnvelopeError]) -> rlp.Encodable:
    """The 0x0c payload acknowledging one 0x01 packet."""
    listed = [[e.hash, rlp.encode_uint(e.code), e.description.encode("utf-8")] for e in refused]
    return [rlp.encode_uint(MESSAGE_RESPONSE_VERSION), [batch_hash, listed]]


def parse_message_response(payload: rlp.Item) -> tuple[bytes, list[EnvelopeError]]:
    """Read a 0x0c payload: the batch hash and the refused envelopes."""
    version, response = rlp.as_list(payload, "message response")
    if rlp.as_uint(version, "message response version", 64) != MESSAGE_RESPONSE_VERSION:
        raise rlp.RlpError("message response: unknown version")
    batch_hash, listed = rlp.as_list(response, "message response body")
    refused = []
    for entry in rlp.as_list(listed, "message response errors"):
        env_hash, code, description = rlp.as_list(entry, "envelope error")
        refused.append(
            EnvelopeError(
                hash=rlp.as_bytes(env_hash, "envelope error hash"),
                code=rlp.as_uint(code, "envelope error code", 64),
                description=rlp.as_bytes(description, "envelope error text").decode(
                    "utf-8", "replace"
                ),
            )
        )
    return rlp.as_bytes(batch_hash, "message response hash"), refused
