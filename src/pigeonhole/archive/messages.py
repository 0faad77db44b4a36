"""The encrypted, signed message inside an envelope's Data (EIP-627 "Contents of Data").

Plaintext: `flags(1) ‖ size(1..3, little-endian) ‖ payload ‖ padding ‖ [signature(65)]`,
with `flags & 0x03` the size field's length and `flags & 0x04` set when signed. The
signature is secp256k1 over keccak256 of everything before it, `R ‖ S ‖ V` with V 0/1
(27/28 accepted). Symmetric encryption is AES-256-GCM with no associated data; the 12-byte
nonce follows `ciphertext ‖ tag`. The key comes from a password by PBKDF2-HMAC-SHA256
with an empty salt and 65356 iterations (sic, as geth's `deriveKeyMaterial`; notes §3).
Pure: randomness (nonce, padding, keys) is always passed in.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import coincurve
from Crypto.Cipher import AES

from pigeonhole.archive.envelopes import keccak256

PBKDF2_ITERATIONS = 65356  # sic: geth whisperv6 and status-go, not 65536
AES_KEY_LENGTH = 32
AES_NONCE_LENGTH = 12
AES_TAG_LENGTH = 16
SIGNATURE_LENGTH = 65
FLAG_SIGNED = 0x04
SIZE_MASK = 0x03
PADDING_BLOCK = 256


class MessageError(ValueError):
    """The Data could not be decrypted or the plaintext is malformed."""


@dataclass(frozen=True)
class OpenedMessage:
    """A decrypted, parsed plaintext; `signer` is the 65-byte public key, or None."""

    payload: bytes
    padding: bytes
    signature: bytes | None
    signer: bytes | None


@functools.lru_cache(maxsize=16)
def sym_key_from_password(password: str) -> bytes:
    """geth's `AddSymKeyFromPassword`: PBKDF2-HMAC-SHA256(password, b"", 65356, 32)."""
    return hashlib.pbkdf2_hmac(
        "sha256", password.encode("utf-8"), b"", PBKDF2_ITERATIONS, AES_KEY_LENGTH
    )


def encrypt_symmetric(key: bytes, plaintext: bytes, nonce: bytes) -> bytes:
    """`ciphertext ‖ tag ‖ nonce`, as Whisper's encryptSymmetric lays it out."""
    if len(nonce) != AES_NONCE_LENGTH:
        raise ValueError("the AES-GCM nonce must be 12 bytes")
    cipher = AES.new(key, AES.MODE_GCM, nonce=nonce, mac_len=AES_TAG_LENGTH)
    ciphertext, tag = cipher.encrypt_and_digest(plaintext)
    return ciphertext + tag + nonce


def decrypt_symmetric(key: bytes, data: bytes) -> bytes:
    """Undo `encrypt_symmetric`; a wrong key or tampered data raises MessageError."""
    if len(data) < AES_NONCE_LENGTH + AES_TAG_LENGTH:
        raise MessageError("missing salt or invalid payload in symmetric message")
    nonce, body = data[-AES_NONCE_LENGTH:], data[:-AES_NONCE_LENGTH]
    cipher = AES.new(key, AES.MODE_GCM, nonce=nonce, mac_len=AES_TAG_LENGTH)
    try:
        return cipher.decrypt_and_verify(body[:-AES_TAG_LENGTH], body[-AES_TAG_LENGTH:])
    except ValueError as err:
        raise MessageError("authentication failed") from err


def size_field_length(payload_length: int) -> int:
    """Go's getSizeOfPayloadSizeField: 1 byte, plus one per factor of 256."""
    size = 1
    while payload_length >= 256:
        payload_length //= 256
        size += 1
    return size


def padding_length(payload_length: int, signed: bool) -> int:
    """Pad to a multiple of 256 bytes; a full 256 when already aligned (Go's rule)."""
    raw = 1 + size_field_length(payload_length) + payload_length
    raw += SIGNATURE_LENGTH if signed else 0
    return PADDING_BLOCK - raw % PADDING_BLOCK


def build_plaintext(payload: bytes, padding: bytes, signing_key: bytes | None) -> bytes:
    """Lay out flags, size, payload and padding, then sign when a key is given."""
    size_len = size_field_length(len(payload))
    if size_len > SIZE_MASK:
        raise ValueError("payload too large for a 3-byte size field")
    flags = size_len | (FLAG_SIGNED if signing_key is not None else 0)
    raw = bytes([flags]) + len(payload).to_bytes(size_len, "little") + payload + padding
    if signing_key is None:
        return raw
    return raw + sign(signing_key, keccak256(raw))


def sign(secret: bytes, digest: bytes) -> bytes:
    """go-ethereum crypto.Sign: R ‖ S ‖ V with V in {0, 1} (RFC 6979, deterministic)."""
    return coincurve.PrivateKey(secret).sign_recoverable(digest, hasher=None)


def public_key(secret: bytes) -> bytes:
    """The 65-byte uncompressed public key (0x04 ‖ X ‖ Y) of a secret key."""
    return coincurve.PrivateKey(secret).public_key.format(compressed=False)


def recover_signer(signature: bytes, digest: bytes) -> bytes | None:
    """The uncompressed public key that made `signature`, or None if none can."""
    if len(signature) != SIGNATURE_LENGTH:
        return None
    v = signature[64]
    v = v - 27 if v in (27, 28) else v  # EIP-627 prose says 27/28; geth emits 0/1
    if v not in (0, 1):
        return None
    try:
        key = coincurve.PublicKey.from_signature_and_message(
            signature[:64] + bytes([v]), digest, hasher=None
        )
    except Exception:  # libsecp256k1 reports every failure the same way
        return None
    return key.format(compressed=False)


def parse_plaintext(raw: bytes) -> OpenedMessage:
    """geth's ValidateAndParse: split off the signature, read the size, the payload."""
    if not raw:
        raise MessageError("empty plaintext")
    end = len(raw)
    signature = signer = None
    if raw[0] & FLAG_SIGNED:
        end -= SIGNATURE_LENGTH
        if end <= 1:
            raise MessageError("plaintext too short for its signature")
        signature = raw[end:]
        signer = recover_signer(signature, keccak256(raw[:end]))
    begin, size = 1, 0
    size_len = raw[0] & SIZE_MASK
    if size_len:
        size = int.from_bytes(raw[begin : begin + size_len], "little")
        begin += size_len
        if begin + size > end:
            raise MessageError("payload size exceeds the message")
    return OpenedMessage(
        payload=raw[begin : begin + size],
        padding=raw[begin + size : end],
        signature=signature,
        signer=signer,
    )


def open_symmetric(key: bytes, data: bytes) -> OpenedMessage:
    """Decrypt an envelope's Data with a symmetric key and parse the plaintext."""
    return parse_plaintext(decrypt_symmetric(key, data))
