"""A small client for the archive: post envelopes, request historic ones, follow cursors.

    async with ArchiveClient.connect("ws://127.0.0.1:4000/whisper/v6") as client:
        refused = await client.post([envelope])
        page = await client.request(RequestPayload(lower, upper, FULL_BLOOM, 100), key)

Requests are signed with a fresh secp256k1 key unless one is given, and encrypted with
the symmetric key from the server's password (`sym_key_from_password`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import aiohttp

from pigeonhole.archive import errors, packets, rlp
from pigeonhole.archive.envelopes import Envelope, keccak256
from pigeonhole.archive.messages import AES_NONCE_LENGTH, padding_length
from pigeonhole.archive.packets import Completion, EnvelopeError
from pigeonhole.archive.requests import (
    PayloadForm,
    RequestPayload,
    encode_payload,
    seal_request,
)

#: largest frame the client accepts (a server's bundles stay under its batch size)
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: seconds to wait before retrying a request refused with "rate limit exceeded"
RATE_LIMIT_BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)


class ArchiveClientError(Exception):
    """The server closed the connection or sent something the client cannot read."""


@dataclass(frozen=True)
class Reply:
    """One request's answer: the envelopes received, then its completion."""

    envelopes: list[Envelope]
    completion: Completion


class ArchiveClient:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, url: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[ArchiveClient]:
        """`headers`: extra request headers (e.g. X-Real-IP, as a trusted proxy sets it)."""
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, max_msg_size=MAX_FRAME_BYTES, headers=headers) as ws,
        ):
            yield cls(ws)

    async def post(self, envelopes: Sequence[Envelope]) -> list[EnvelopeError]:
        """Send one 0x01 packet; return the refused envelopes once the server committed."""
        payload = rlp.encode_raw_list([e.rlp for e in envelopes])
        batch_hash = keccak256(payload)
        await self._ws.send_bytes(packets.encode_packet_raw(packets.MESSAGES, payload))
        while True:
            packet = await self._receive()
            if packet.code != packets.MESSAGE_RESPONSE:
                continue
            answered, refused = packets.parse_message_response(packet.payload)
            if answered == batch_hash:
                return refused

    async def request(
        self,
        payload: RequestPayload,
        sym_key: bytes,
        *,
        signing_key: bytes | None = None,
        target_pow: float = 0.0,
        form: PayloadForm = 7,
    ) -> Reply:
        """Send one 0x7e request; collect the 0x7f envelopes until its 0x7d completion."""
        encoded = encode_payload(payload, form)
        key = signing_key if signing_key is not None else secrets.token_bytes(32)
        envelope = seal_request(
            encoded,
            sym_key=sym_key,
            signing_key=key,
            padding=secrets.token_bytes(padding_length(len(encoded), signed=True)),
            aes_nonce=secrets.token_bytes(AES_NONCE_LENGTH),
            now=int(time.time()),
            target_pow=target_pow,
        )
        return await self.send_request(envelope)

    async def send_request(self, envelope: Envelope) -> Reply:
        """Send a ready-made request envelope and collect its answer."""
        await self._ws.send_bytes(packets.encode_packet_raw(packets.P2P_REQUEST, envelope.rlp))
        received: list[Envelope] = []
        while True:
            packet = await self._receive()
            if packet.code == packets.P2P_MESSAGE:
                received.extend(_envelopes(packet.payload))
            elif packet.code == packets.REQUEST_COMPLETE:
                completion = _completion(packet.payload)
                if completion.request_id == envelope.hash:
                    return Reply(received, completion)

    async def request_all(
        self,
        payload: RequestPayload,
        sym_key: bytes,
        *,
        signing_key: bytes | None = None,
        target_pow: float = 0.0,
        form: PayloadForm = 7,
    ) -> AsyncIterator[Reply]:
        """Follow cursors until a page comes back without one (or with an error).

        A page refused with "rate limit exceeded" is retried after a growing pause.
        """
        backoff = list(RATE_LIMIT_BACKOFF)
        while True:
            page = await self.request(
                payload, sym_key, signing_key=signing_key, target_pow=target_pow, form=form
            )
            if page.completion.error == errors.RATE_LIMITED and backoff:
                await asyncio.sleep(backoff.pop(0))
                continue
            yield page
            if page.completion.error is not None or not page.completion.cursor:
                return
            backoff = list(RATE_LIMIT_BACKOFF)
            payload = replace(payload, cursor=page.completion.cursor)

    async def _receive(self) -> packets.Packet:
        msg = await self._ws.receive()
        if msg.type != aiohttp.WSMsgType.BINARY:
            code = self._ws.close_code
            raise ArchiveClientError(f"connection closed (code {code}): {msg.extra or ''}")
        try:
            return packets.decode_packet(msg.data)
        except rlp.RlpError as err:
            raise ArchiveClientError(f"malformed packet from server: {err}") from err


def _envelopes(payload: rlp.Item) -> list[Envelope]:
    try:
        return packets.envelopes_of_p2p_message(payload)
    except (rlp.RlpError, ValueError) as err:
        raise ArchiveClientError(f"malformed envelopes from server: {err}") from err


def _completion(payload: rlp.Item) -> Completion:
    try:
        return packets.parse_completion(rlp.as_bytes(payload, "completion"))
    except ValueError as err:
        raise ArchiveClientError(f"malformed completion from server: {err}") from err
