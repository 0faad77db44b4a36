"""The archive's WebSocket endpoint (aiohttp): a thin adapter around `Mailserver`.

`add_archive_routes(app, config)` registers the route (`config.path`, /whisper/v6 by
default) and the hooks that open the archive and start retention on startup, close the
sockets on shutdown, and drain and close the archive on cleanup. Each binary message is
one packet (`packets`); the connection handles its packets in order:

- 0x01 Messages: judge, charge each accepted envelope to its client's quota
  (archive/quota.py; refused when over it, or when the disk is below the archive's own
  free-space threshold), commit them (group commit), and only then answer with the 0x0c
  message response;
- 0x7e P2P request: check, read the page on the reader thread, send the 0x7f bundles,
  then the 0x7d completion; a refused request gets an `ERROR=` completion.

A frame that is not `[code, payload]` RLP, or a Messages payload that is not a list,
closes the socket with 1002; a text frame with 1003; a storage failure with 1011.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from pigeonhole.archive import errors, packets, rlp
from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.errors import RequestRefused
from pigeonhole.archive.mailserver import Ingest, Mailserver, item_hash
from pigeonhole.archive.messages import sym_key_from_password
from pigeonhole.archive.metrics import ArchiveMetrics
from pigeonhole.archive.packets import EnvelopeError
from pigeonhole.archive.query import Page, envelope_key, key_range, paginate, retention_cutoff
from pigeonhole.archive.quota import ArchiveQuota
from pigeonhole.archive.requests import Query
from pigeonhole.archive.store import ArchiveStore, NewRow
from pigeonhole.archive.writer import GroupWriter
from pigeonhole.clients import client_key

log = logging.getLogger("pigeonhole.archive")

Clock = Callable[[], float]
PeerOf = Callable[[web.Request], str]
#: why the server stores nothing new now (its disk is low, its storage failing), or None
Refusing = Callable[[], str | None]


def _storing() -> str | None:
    return None


def remote_peer(request: web.Request) -> str:
    """The default peer identity for rate limiting: the TCP peer's address."""
    return request.remote or "unknown"


class ArchiveService:
    """Owns the archive's store, writer, decisions, retention task and metrics."""

    def __init__(
        self, config: ArchiveConfig, clock: Clock, peer_of: PeerOf, refusing: Refusing = _storing
    ) -> None:
        self.config = config
        self.clock = clock
        self._refusing = refusing
        self.metrics = ArchiveMetrics()
        self.store = ArchiveStore(config.archive_db)
        self._peer_of = peer_of
        self._write_exec = ThreadPoolExecutor(1, thread_name_prefix="pigeonhole-archive-w")
        self._read_exec = ThreadPoolExecutor(1, thread_name_prefix="pigeonhole-archive-r")
        self.writer = GroupWriter(self.store, self._write_exec)
        self.quota = ArchiveQuota(config.max_bytes_per_address, config.max_bytes)
        self._core: Mailserver | None = None
        #: free bytes in the data directory at the last post (None: none measured yet)
        self.disk_free: int | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._retention: asyncio.Task[None] | None = None

    def reconfigure(self, config: ArchiveConfig) -> None:
        """A reload's bounds: the quotas, the proof of work, the request interval and the
        disk floor hold for what comes next (the key, the path and the retention task
        stay as started)."""
        self.config = config
        self.quota.max_bytes_per_address = config.max_bytes_per_address
        self.quota.max_bytes = config.max_bytes
        if self._core is not None:
            self._core.config = config
            self._core.limiter.interval = config.min_request_interval

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        key = await loop.run_in_executor(None, sym_key_from_password, self.config.password)
        self._core = Mailserver(self.config, key)
        await loop.run_in_executor(self._write_exec, self.store.open)
        held = await loop.run_in_executor(self._read_exec, self.store.held)
        prefix = self.config.ipv6_prefix
        self.quota.load((client_key(owner, prefix), n) for owner, n in held)
        if self.config.retention_days > 0:
            self._retention = loop.create_task(self._retention_loop())
        log.info("archive open at %s, serving %s", self.config.archive_db, self.config.path)

    async def close_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")

    async def stop(self) -> None:
        if self._retention is not None:
            self._retention.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retention
        await self.writer.drain()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._read_exec, _nothing)  # queries still running finish
        await loop.run_in_executor(self._write_exec, self.store.close)
        self._write_exec.shutdown(wait=False)
        self._read_exec.shutdown(wait=False)

    async def run_retention(self) -> int:
        """Delete envelopes created more than `retention_days` ago; return how many."""
        cutoff = retention_cutoff(self.clock(), self.config.retention_days)
        loop = asyncio.get_running_loop()
        deleted, freed = await loop.run_in_executor(
            self._write_exec, self.store.delete_before, cutoff
        )
        prefix = self.config.ipv6_prefix
        for owner, size in freed.items():
            self.quota.refund(client_key(owner, prefix), size)
        self.metrics.expired_deleted += deleted
        if deleted:
            log.info("retention deleted %d envelopes", deleted)
        return deleted

    async def _retention_loop(self) -> None:
        while True:
            try:
                await self.run_retention()
            except Exception:
                log.exception("retention failed")
            await asyncio.sleep(self.config.retention_interval)

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=self.config.max_frame_bytes)
        try:
            await ws.prepare(request)
        except web.HTTPException:
            self.metrics.malformed["handshake"] += 1  # aiohttp's own 400 (no upgrade ...)
            raise
        except ValueError:  # a Sec-WebSocket-Key that is not ASCII: aiohttp cannot decode it
            self.metrics.malformed["handshake"] += 1
            raise web.HTTPBadRequest(text="invalid Sec-WebSocket-Key\n") from None
        peer = self._peer_of(request)
        self._sockets.add(ws)
        try:
            await self._serve_socket(ws, peer)
        except ConnectionResetError:
            log.debug("archive peer %s went away mid-answer", peer)
        except Exception:
            log.exception("archive connection failed")
            await ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"internal error")
        finally:
            self._sockets.discard(ws)
        return ws

    async def _serve_socket(self, ws: web.WebSocketResponse, peer: str) -> None:
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                self.metrics.malformed["text frame"] += 1
                await ws.close(code=WSCloseCode.UNSUPPORTED_DATA, message=b"binary frames only")
                return
            if msg.type != WSMsgType.BINARY:
                continue
            try:
                await self._on_frame(ws, msg.data, peer)
            except rlp.RlpError as err:
                self.metrics.malformed["malformed packet"] += 1
                reason = f"malformed packet: {err}"[:120].encode("utf-8", "replace")
                await ws.close(code=WSCloseCode.PROTOCOL_ERROR, message=reason)
                return

    async def _on_frame(self, ws: web.WebSocketResponse, frame: bytes, peer: str) -> None:
        packet = packets.decode_packet(frame)
        if packet.code == packets.MESSAGES:
            await self._archive(ws, packet.payload, peer)
        elif packet.code == packets.P2P_REQUEST:
            await self._answer(ws, packet.payload, peer)
        # any other code is ignored (EIP-627: unknown packet codes are skipped)

    async def _archive(self, ws: web.WebSocketResponse, payload: rlp.Item, peer: str) -> None:
        assert self._core is not None, "started before serving"
        ingest = self._core.ingest(payload, self.clock())
        if ingest.accepted:
            self._refuse_all_when_storing_stops(ingest)
        rows: list[NewRow] = []
        owner = peer if self.config.store_owners else None
        for envelope in ingest.accepted:
            over = self.quota.reserve(peer, len(envelope.rlp))
            if over is None:
                rows.append((envelope_key(envelope), envelope.rlp, owner))
            else:
                ingest.refused.append(EnvelopeError(envelope.hash, over.code, over.message))
                ingest.reasons.append(over.reason)
        reserved = sum(len(raw) for _, raw, _ in rows)
        try:
            new, new_bytes = await self.writer.add(rows) if rows else (0, 0)
        except BaseException:
            self.quota.refund(peer, reserved)
            raise
        self.quota.refund(peer, reserved - new_bytes)  # duplicates hold nothing new
        self.metrics.archived += new
        self.metrics.duplicates += len(rows) - new
        self.metrics.refused_envelopes.update(ingest.reasons)
        response = packets.message_response(ingest.batch_hash, ingest.refused)
        await ws.send_bytes(packets.encode_packet(packets.MESSAGE_RESPONSE, response))

    def figures(self) -> dict[str, Any]:
        """The archive's figures: holdings against their bounds, and its counters."""
        c = self.config
        return {
            "stored_bytes": self.quota.total,
            "max_bytes": c.max_bytes,
            "max_bytes_per_address": c.max_bytes_per_address,
            "addresses": len(self.quota.bytes_by),
            "disk_free": self.disk_free,
            "min_disk_free": c.min_disk_free,
            "archived": self.metrics.archived,
            "duplicates": self.metrics.duplicates,
            "served": self.metrics.served,
            "requests": self.metrics.requests,
            "refused": self.metrics.refused,
            "expired_deleted": self.metrics.expired_deleted,
            "refused_requests": dict(self.metrics.refused_requests),
            "refused_envelopes": dict(self.metrics.refused_envelopes),
            "malformed": dict(self.metrics.malformed),
        }

    def held_by(self) -> dict[str, int]:
        """Envelope bytes held per client key (the status page's busiest addresses)."""
        return dict(self.quota.bytes_by)

    def _refuse_all_when_storing_stops(self, ingest: Ingest) -> None:
        """The disk is the server's to protect: every envelope is listed as refused."""
        why, reason = self._refusing(), "storage refused"
        if why is None:
            why, reason = self._disk_low(), "disk_low"
        if why is not None:
            ingest.refused.extend(
                EnvelopeError(e.hash, errors.CODE_OTHER, why) for e in ingest.accepted
            )
            ingest.reasons.extend(reason for _ in ingest.accepted)
            ingest.accepted.clear()

    def _disk_low(self) -> str | None:
        """The archive's own free-space threshold, measured now (one statvfs)."""
        if not self.config.min_disk_free:
            return None
        try:
            stat = os.statvfs(self.config.data_dir)
        except OSError:
            return None  # the mailbox's disk watch reports a data directory it cannot read
        self.disk_free = stat.f_bavail * stat.f_frsize
        if self.disk_free < self.config.min_disk_free:
            return errors.DISK_LOW
        return None

    async def _answer(self, ws: web.WebSocketResponse, payload: rlp.Item, peer: str) -> None:
        assert self._core is not None, "started before serving"
        request_id = item_hash(payload)
        try:
            query = self._core.open_request(payload, peer, self.clock())
        except RequestRefused as refusal:
            self.metrics.refused_requests[refusal.reason] += 1
            error = packets.error_payload(request_id, refusal.message)
            await ws.send_bytes(packets.encode_packet(packets.REQUEST_COMPLETE, error))
            return
        loop = asyncio.get_running_loop()
        page = await loop.run_in_executor(self._read_exec, self._read_page, query)
        for bundle in page.bundles:
            for frame in _frames(bundle, query.batch):
                await ws.send_bytes(frame)
        self.metrics.served += page.count
        self.metrics.requests += 1
        done = packets.completion_payload(request_id, page.last_hash, page.cursor)
        await ws.send_bytes(packets.encode_packet(packets.REQUEST_COMPLETE, done))

    def _read_page(self, query: Query) -> Page:
        with contextlib.closing(self.store.scan(key_range(query))) as rows:
            return paginate(rows, query, self.config.max_batch_bytes)


def _frames(bundle: list[bytes], batch: bool) -> list[bytes]:
    """One 0x7f frame per bundle, or one per envelope when the client asked Batch=false."""
    if batch:
        return [packets.p2p_message_frame(bundle)]
    return [packets.p2p_message_frame([raw]) for raw in bundle]


def _nothing() -> None:
    """A no-op run on an executor as a barrier behind the work queued before it."""


ARCHIVE_KEY = web.AppKey("pigeonhole_archive", ArchiveService)


def add_archive_routes(
    app: web.Application,
    config: ArchiveConfig,
    *,
    clock: Clock = time.time,
    peer_of: PeerOf = remote_peer,
    refusing: Refusing = _storing,
) -> None:
    """Serve the archive on `config.path` of `app`; `app[ARCHIVE_KEY]` is the service.

    Args:
        clock: UNIX time source (tests pass a fake one).
        peer_of: who a connection is, for the per-peer request interval (e.g. the
            address a trusted proxy reports).
        refusing: why nothing new may be stored now (low disk, failing storage), or
            None; posted envelopes are then refused in the receipt.
    """
    serve_archive(app, ArchiveService(config, clock, peer_of, refusing))


def serve_archive(app: web.Application, service: ArchiveService) -> None:
    """Serve a made archive on its path of `app`, opened and closed with the app."""
    app[ARCHIVE_KEY] = service
    app.router.add_get(service.config.path, service.handle)

    async def on_startup(_: web.Application) -> None:
        await service.start()

    async def on_shutdown(_: web.Application) -> None:
        await service.close_sockets()

    async def on_cleanup(_: web.Application) -> None:
        await service.stop()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
