"""Every test vector of whisper-mailserver-notes.md (§3.4, §4), byte for byte."""

from __future__ import annotations

import hashlib

import pytest

from pigeonhole.archive import rlp
from pigeonhole.archive.bloom import FULL_BLOOM, bloom_match, topic_to_bloom
from pigeonhole.archive.envelopes import Envelope, bytes_to_topic, keccak256, pow_value
from pigeonhole.archive.messages import (
    open_symmetric,
    padding_length,
    public_key,
    sym_key_from_password,
)
from pigeonhole.archive.packets import completion_payload, parse_completion
from pigeonhole.archive.query import db_key
from pigeonhole.archive.requests import (
    RequestPayload,
    decode_payload,
    encode_payload,
    seal_request,
)

DEADBEEF = bytes.fromhex("deadbeef")


def _envelope(nonce: int) -> Envelope:
    return Envelope(expiry=0, ttl=1, topic=bytes(4), data=DEADBEEF, nonce=nonce)


# -- §4.2 / §4.1: envelopes, hashes, PoW ------------------------------------------


@pytest.mark.parametrize(
    ("nonce", "rlp_hex", "hash_hex"),
    [
        (
            100000,
            "d08001840000000084deadbeef830186a0",
            "660f65a268e219b51aa55347adab435ffa14835a64d247a72bc2ef88cae6dc58",
        ),
        (
            276,
            "cf8001840000000084deadbeef820114",
            "300e63ed3c7a65d646006bd8f92ed35851ac71038f39912186f66bcb8003413f",
        ),
    ],
)
def test_envelope_rlp_and_hash(nonce: int, rlp_hex: str, hash_hex: str) -> None:
    """The envelope RLP and its Keccak-256 hash match the notes (§4.2)."""
    envelope = _envelope(nonce)
    assert envelope.rlp.hex() == rlp_hex
    assert envelope.hash.hex() == hash_hex
    assert envelope.hash != hashlib.sha3_256(envelope.rlp).digest()  # Keccak, not SHA3


def test_storage_timestamp_wraps() -> None:
    """Expiry 0, TTL 1 is stored at (0 - 1) mod 2**32 = 0xffffffff (§4.2)."""
    assert _envelope(276).created == 0xFFFFFFFF


def test_short_rlp() -> None:
    """The PoW input is cc8001840000000084deadbeef, 13 bytes (§4.1)."""
    assert _envelope(0).short_rlp().hex() == "cc8001840000000084deadbeef"


@pytest.mark.parametrize(
    ("nonce", "pow_hash", "expected"),
    [
        (
            100000,
            "a788e02a95bfc673709e97ca81e39ca903bad5638d3388964c51eb64952172d6",
            0.07692307692307693,
        ),
        (
            276,
            "00e2374c6353c243e4073e209a7f2acb2506522af318b3b78cf9a88310a2a11c",
            19.692307692307693,
        ),
    ],
)
def test_pow_vectors(nonce: int, pow_hash: str, expected: float) -> None:
    """status-go envelope_test / nim-eth test_shh: PoW hash and value (§4.1)."""
    envelope = _envelope(nonce)
    digest = keccak256(envelope.short_rlp() + nonce.to_bytes(8, "big"))
    assert digest.hex() == pow_hash
    assert envelope.pow() == expected


@pytest.mark.parametrize(
    ("digest", "expected"),
    [
        (
            bytes(32),
            115792089237316200000000000000000000000000000000000000000000000000000000000000.0,
        ),
        (
            bytes(31) + b"\x01",
            57896044618658100000000000000000000000000000000000000000000000000000000000000.0,
        ),
        (b"\xff" + bytes(31), 1.0),
    ],
)
def test_parity_leading_zero_cases(digest: bytes, expected: float) -> None:
    """calcPow(1, 1, hash) for the Parity leading-zero cases in nim-eth (§4.1)."""
    assert pow_value(digest, 1, 1) == expected


def _geth18_pow(envelope: Envelope) -> float:
    """The old geth <= 1.8 PoW (trailing zeros), only to show it is not ours (§1.3)."""
    buf = bytearray(64)
    buf[0:32] = keccak256(envelope.short_rlp())
    buf[56:64] = envelope.nonce.to_bytes(8, "big")
    value = int.from_bytes(keccak256(bytes(buf)), "big")
    first_bit = (value & -value).bit_length() - 1 if value else 256
    return float(2**first_bit) / envelope.size() / envelope.ttl


def test_old_geth_pow_differs() -> None:
    """The old trailing-zero PoW gives 0.041666666666666664 (§4.2); EIP-627 gives 1/13."""
    envelope = _envelope(100000)
    assert _geth18_pow(envelope) == 0.041666666666666664
    assert envelope.pow() != _geth18_pow(envelope)


# -- blooms ---------------------------------------------------------------------


def test_bloom_1f7ea17f() -> None:
    """TopicToBloom(1f7ea17f): byte 35 = 0x80, 47 = 0x40, 52 = 0x02, nothing else."""
    bloom = topic_to_bloom(bytes.fromhex("1f7ea17f"))
    assert {i: b for i, b in enumerate(bloom) if b} == {35: 0x80, 47: 0x40, 52: 0x02}


@pytest.mark.parametrize(("topic", "byte0"), [("00000000", 0x01), ("01020300", 0x08)])
def test_bloom_assignment_not_or(topic: str, byte0: int) -> None:
    """Go assigns the byte: 00000000 -> 0x01; 01020300 -> 0x08, not the OR's 0x0e."""
    bloom = topic_to_bloom(bytes.fromhex(topic))
    assert bloom[0] == byte0
    assert bloom[1:] == bytes(63)


def test_bloom_match_rules() -> None:
    """geth TestBloom: self-match, `x | b` matches `b`, full bloom one way only."""
    bloom = topic_to_bloom(bytes.fromhex("0000ff06"))
    x = bytearray(64)
    x[0], x[32], x[63] = 1, 1, 128
    assert bloom == bytes(x)
    assert bloom_match(bloom, bloom)
    union = bytes(a | b for a, b in zip(bloom, bytes(x), strict=True))
    assert bloom_match(union, bloom)
    x[17] = 254
    assert bloom_match(FULL_BLOOM, bytes(x))
    assert not bloom_match(bytes(x), FULL_BLOOM)


# -- keys and topics ---------------------------------------------------------------


def test_db_key() -> None:
    """status-go db_key_test: abcdef12 ‖ 0102…3132 ‖ 01020304."""
    digest = bytes.fromhex("0102030405060708091011121314151617181920212223242526272829303132")
    key = db_key(0xABCDEF12, digest, bytes.fromhex("01020304"))
    assert key.hex() == "abcdef12" + digest.hex() + "01020304"
    assert len(key) == 40


@pytest.mark.parametrize(
    ("raw", "topic"),
    [
        (bytes([0xEA, 0x1D, 0x43]), "ea1d4300"),
        (bytes([0x6F, 0x3C, 0xB0, 0xDD, 0x0F, 0x00, 0x90]), "6f3cb0dd"),
        (b"", "00000000"),
        (bytes([0x00, 0x7F, 0x80, 0xFF]), "007f80ff"),
        (bytes([0xF2, 0x6E, 0x77, 0x79]), "f26e7779"),
    ],
)
def test_bytes_to_topic(raw: bytes, topic: str) -> None:
    """whisper/topic_test.go: BytesToTopic copies up to 4 bytes and zero-fills."""
    assert bytes_to_topic(raw).hex() == topic


# -- request payloads -------------------------------------------------------------------

DECODE_REQUEST = RequestPayload(lower=50, upper=100, bloom=b"\x01", limit=10)


@pytest.mark.parametrize(
    ("form", "hex_rlp"),
    [(7, "c7326401c00a8001"), (6, "c63264010a8001"), (5, "c53264010a80")],
)
def test_request_payload_forms(form: int, hex_rlp: str) -> None:
    """TestDecodeRequest's payload in the 7-, 6- and 5-field forms round-trips (§4.2)."""
    assert encode_payload(DECODE_REQUEST, form).hex() == hex_rlp  # type: ignore[arg-type]
    assert decode_payload(bytes.fromhex(hex_rlp)) == DECODE_REQUEST


# -- §3.4: a full request ------------------------------------------------------------------


def test_symmetric_key_iterations() -> None:
    """PBKDF2 with 65356 iterations (sic); 65536 gives a different key (§3.4)."""
    assert sym_key_from_password("status-offline-inbox").hex() == (
        "765df27c0765526f920ba742ff4b9452bb0064e016435ffccd81186aa6feaae8"
    )
    wrong = hashlib.pbkdf2_hmac("sha256", b"status-offline-inbox", b"", 65536, 32)
    assert wrong.hex() == "0f8fc0f8afc4ee8e0a12ff2898ce3f8ea12bdf449dc67b636f8c1724984bd40f"


def test_full_request_vector() -> None:
    """The notes' worked request: payload, plaintext, Data, RequestID, signer, 0x7d."""
    payload = RequestPayload(
        lower=1700000000,
        upper=1700003600,
        bloom=topic_to_bloom(bytes.fromhex("1f7ea17f")),
        limit=100,
        cursor=b"",
        topics=(),
        batch=True,
    )
    encoded = encode_payload(payload, 7)
    bloom_hex = "00" * 35 + "80" + "00" * 11 + "40" + "00" * 4 + "02" + "00" * 11
    assert encoded.hex() == "f850846553f100846553ff10b840" + bloom_hex + "c0648001"
    assert len(encoded) == 82
    key = sym_key_from_password("status-offline-inbox")
    secret = b"\x11" * 32
    envelope = seal_request(
        encoded,
        sym_key=key,
        signing_key=secret,
        padding=bytes(padding_length(len(encoded), signed=True)),
        aes_nonce=bytes(range(12)),
        now=1700000000,
    )
    assert (envelope.expiry, envelope.ttl, envelope.topic, envelope.nonce) == (
        1700000050,
        50,
        bytes(4),
        0,
    )
    assert len(envelope.data) == 284
    assert envelope.hash.hex() == (
        "947cbaead6ca8fbafd92128ebfe3774fa9938dae5f6a42b70995b1e15c9b649e"
    )
    opened = open_symmetric(key, envelope.data)
    signer = (
        "044f355bdcb7cc0af728ef3cceb9615d90684bb5b2ca5f859ab0f0b704075871aa"
        "385b6b1b8ead809ca67454d9683fcf2ba03456d6fe2c4abe2b07f0fbdbb2f1c1"
    )
    assert opened.signer is not None and opened.signer.hex() == signer
    assert public_key(secret).hex() == signer
    assert opened.payload == encoded
    assert opened.signature is not None and opened.signature[64] == 1


def test_full_request_plaintext_layout() -> None:
    """The plaintext is 256 bytes, flags 0x05, size field 0x52 (§3.4)."""
    from pigeonhole.archive.messages import build_plaintext

    encoded = bytes(82)
    plain = build_plaintext(encoded, bytes(padding_length(82, signed=True)), b"\x11" * 32)
    assert len(plain) == 256
    assert plain[0] == 0x05
    assert plain[1] == 0x52


def test_completion_with_cursor_is_100_bytes() -> None:
    """A success 0x7d payload with a cursor is 100 bytes, RLP prefix b864 (§3.4)."""
    request_id = bytes.fromhex("947cbaead6ca8fbafd92128ebfe3774fa9938dae5f6a42b70995b1e15c9b649e")
    payload = completion_payload(request_id, b"\x22" * 32, b"\x33" * 36)
    assert len(payload) == 100
    assert rlp.encode(payload)[:2].hex() == "b864"
    parsed = parse_completion(payload)
    assert (parsed.request_id, parsed.cursor, parsed.error) == (request_id, b"\x33" * 36, None)


@pytest.mark.parametrize(
    ("payload_len", "signed", "padding"),
    [(3, False, 251), (3, True, 186), (254, False, 256), (253, False, 1)],
)
def test_padding_lengths(payload_len: int, signed: bool, padding: int) -> None:
    """nim-eth padding cases: 3 -> 251, signed 3 -> 186, 254 -> 256, 253 -> 1 (§3.3)."""
    assert padding_length(payload_len, signed) == padding


# -- §4.1 TestBloomFromReceivedMessage / TestMailServer, on the raw fallback ------------------


@pytest.mark.parametrize(
    ("payload", "outcome"),
    [
        (b"", "Undersized p2p request"),
        (b"hohohohoho", "Undersized bloom filter in p2p request"),
        (b"12345678", FULL_BLOOM),
    ],
)
def test_bloom_from_received_message(payload: bytes, outcome: str | bytes) -> None:
    """Empty -> undersized; 10 bytes -> undersized bloom; 8 bytes -> full-node bloom."""
    from pigeonhole.archive.errors import RequestRefused
    from pigeonhole.archive.requests import decode_raw_payload

    if isinstance(outcome, bytes):
        assert decode_raw_payload(payload).bloom == outcome
        return
    with pytest.raises(RequestRefused) as info:
        decode_raw_payload(payload)
    assert info.value.message == outcome
