"""The archive's WebSocket endpoint (aiohttp): a thin adapter around `Mailserver`.

`add_archive_routes(app, config)` registers the route (`config.path`, /whisper/v6 by
default) and the hooks that open the archive and start retention on startup, close the
sockets on shutdown, and drain and close the archive on cleanup. Each binary message is
one packet (`packets`); the connection handles its packets in order:

- 0x01 Messages: judge, commit the accepted envelopes (group commit), and only then
  answer with the 0x0c message response;
- 0x7e P2P request: check, read the page on the reader thread, send the 0x7f bundles,
  then the 0x7d completion; a refused request gets an `ERROR=` completion.

A frame that is not `[code, payload]` RLP, or a Messages payload that is not a list,
closes the socket with 1002; a text frame with 1003; a storage failure with 1011.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from aiohttp import WSCloseCode, WSMsgType, web

from pigeonhole.archive import errors, packets, rlp
from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.errors import RequestRefused
from pigeonhole.archive.mailserver import Mailserver, item_hash
from pigeonhole.archive.messages import sym_key_from_password
from pigeonhole.archive.metrics import ArchiveMetrics
from pigeonhole.archive.packets import EnvelopeError
from pigeonhole.archive.query import Page, envelope_key, key_range, paginate, retention_cutoff
from pigeonhole.archive.requests import Query
from pigeonhole.archive.store import ArchiveStore
from pigeonhole.archive.writer import GroupWriter

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
        self._core: Mailserver | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._retention: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        key = await loop.run_in_executor(None, sym_key_from_password, self.config.password)
        self._core = Mailserver(self.config, key)
        await loop.run_in_executor(self._write_exec, self.store.open)
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
        deleted = await loop.run_in_executor(self._write_exec, self.store.delete_before, cutoff)
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
        await ws.prepare(request)
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
                await ws.close(code=WSCloseCode.UNSUPPORTED_DATA, message=b"binary frames only")
                return
            if msg.type != WSMsgType.BINARY:
                continue
            try:
                await self._on_frame(ws, msg.data, peer)
            except rlp.RlpError as err:
                reason = f"malformed packet: {err}"[:120].encode("utf-8", "replace")
                await ws.close(code=WSCloseCode.PROTOCOL_ERROR, message=reason)
                return

    async def _on_frame(self, ws: web.WebSocketResponse, frame: bytes, peer: str) -> None:
        packet = packets.decode_packet(frame)
        if packet.code == packets.MESSAGES:
            await self._archive(ws, packet.payload)
        elif packet.code == packets.P2P_REQUEST:
            await self._answer(ws, packet.payload, peer)
        # any other code is ignored (EIP-627: unknown packet codes are skipped)

    async def _archive(self, ws: web.WebSocketResponse, payload: rlp.Item) -> None:
        assert self._core is not None, "started before serving"
        ingest = self._core.ingest(payload, self.clock())
        why = self._refusing() if ingest.accepted else None
        if why is not None:  # the disk is the server's to protect: listed as refused
            ingest.refused.extend(
                EnvelopeError(e.hash, errors.CODE_OTHER, why) for e in ingest.accepted
            )
            ingest.reasons.extend("storage refused" for _ in ingest.accepted)
            ingest.accepted.clear()
        rows = [(envelope_key(e), e.rlp) for e in ingest.accepted]
        new = await self.writer.add(rows) if rows else 0
        self.metrics.archived += new
        self.metrics.duplicates += len(rows) - new
        self.metrics.refused_envelopes.update(ingest.reasons)
        response = packets.message_response(ingest.batch_hash, ingest.refused)
        await ws.send_bytes(packets.encode_packet(packets.MESSAGE_RESPONSE, response))

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
    service = ArchiveService(config, clock, peer_of, refusing)
    app[ARCHIVE_KEY] = service
    app.router.add_get(config.path, service.handle)

    async def on_startup(_: web.Application) -> None:
        await service.start()

    async def on_shutdown(_: web.Application) -> None:
        await service.close_sockets()

    async def on_cleanup(_: web.Application) -> None:
        await service.stop()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)


def archive_metrics(app: web.Application) -> ArchiveMetrics:
    """The archive's counters, for the server's /metrics page."""
    return app[ARCHIVE_KEY].metrics
