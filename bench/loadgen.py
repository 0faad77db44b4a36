"""The benchmark's load generator: complete two-sided Magic Wormhole exchanges.

One exchange is what two real clients do (reference-behaviour §7.2): each side connects
and waits for `welcome`, `bind`s (appid, side, client_version); side A `allocate`s and
`claim`s the nameplate it got, side B `claim`s the same nameplate; both `open` the
mailbox and `add` `pake`; on the first message from the peer each `release`s the
nameplate and adds `version`; on the peer's `version` each adds its application
messages ("0", "1", ...); once it has the peer's messages, the echoes of its own and
`released`, it `close`s with mood `happy`, waits for `closed`, and drops the WebSocket.
Every message must arrive intact (side, phase, body, id), exactly once, at the peer.

Modes (each prints one JSON document on stdout):

    loadgen.py exchanges --url ws://127.0.0.1:P/v1 --concurrency N --start-at T ...
    loadgen.py exchanges --url ws://127.0.0.1:P/v1 --url-b ws://127.0.0.1:Q/v1 ...
    loadgen.py idle --url ws://127.0.0.1:P/v1 --steps 1000,10000,20000
    loadgen.py crowd --url ws://127.0.0.1:P/v1 --steps 2000,8000,15000

With --url-b, side B of every exchange connects there (another node of the same server,
so every message crosses nodes); side A, the allocator, stays on --url.

`idle` opens connections (connect, welcome, bind) step by step; after each step it
prints one JSON line and waits for a line on stdin before going on, so the caller can
read the server's memory. `crowd` does the same with waiting senders (bind, allocate,
claim, open, add `pake`, then wait), the crowd a busy server carries. Runs on uvloop
with orjson; the WebSocket client is aiohttp (default, the cheaper of the two measured)
or websockets.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import math
import os
import random
import resource
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import orjson

APPID = "lothar.com/wormhole/text-or-file-xfer"
CLIENT_VERSION = ["python", "0.24.0"]


class ExchangeError(Exception):
    """An exchange went wrong; str() is the failure category."""


# --- WebSocket clients --------------------------------------------------------------


class AiohttpClient:
    name = "aiohttp"

    def __init__(self, limit_connect_timeout: float) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._timeout = limit_connect_timeout
        self.session: Any = None

    async def start(self) -> None:
        aiohttp = self._aiohttp
        connector = aiohttp.TCPConnector(limit=0, force_close=True, use_dns_cache=False)
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout)

    async def stop(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def connect(self, url: str) -> AiohttpConn:
        aiohttp = self._aiohttp
        try:
            # the TCP connect and HTTP upgrade, bounded like a real client's connect
            async with asyncio.timeout(self._timeout):
                ws = await self.session.ws_connect(
                    url,
                    autoping=True,
                    autoclose=True,
                    compress=0,
                    max_msg_size=0,
                    timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
                )
        except aiohttp.WSServerHandshakeError as err:
            raise ExchangeError(f"handshake refused: HTTP {err.status}") from None
        except TimeoutError:
            raise ExchangeError("connect timeout") from None
        except aiohttp.ClientConnectorError as err:
            raise ExchangeError(f"connect failed: {_oserr(err.os_error)}") from None
        except (aiohttp.ClientError, OSError) as err:
            raise ExchangeError(f"connect failed: {type(err).__name__}") from None
        return AiohttpConn(ws, aiohttp.WSMsgType)


def _oserr(err: BaseException | None) -> str:
    if err is None:
        return "?"
    if isinstance(err, OSError) and err.errno is not None:
        import errno

        return errno.errorcode.get(err.errno, str(err.errno))
    return type(err).__name__


class AiohttpConn:
    __slots__ = ("_t", "ws")

    def __init__(self, ws: Any, types: Any) -> None:
        self.ws = ws
        self._t = types

    async def send(self, data: str) -> None:
        try:
            await self.ws.send_str(data)
        except (ConnectionError, RuntimeError) as err:
            raise ExchangeError(f"send failed: {type(err).__name__}") from None

    async def recv(self) -> str:
        msg = await self.ws.receive()
        t = msg.type
        if t is self._t.TEXT:
            return msg.data  # type: ignore[no-any-return]
        if t is self._t.BINARY:
            raise ExchangeError("binary frame from server")
        if t in (self._t.CLOSE, self._t.CLOSING, self._t.CLOSED):
            code = self.ws.close_code
            raise ExchangeError(f"closed by server: {code}")
        raise ExchangeError(f"connection error: {type(self.ws.exception()).__name__}")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()

    def abort(self) -> None:
        resp = getattr(self.ws, "_response", None)
        conn = getattr(resp, "connection", None)
        if conn is not None and conn.transport is not None:
            conn.transport.abort()

    @property
    def closed(self) -> bool:
        return bool(self.ws.closed)


class WebsocketsClient:
    name = "websockets"

    def __init__(self, connect_timeout: float) -> None:
        self._timeout = connect_timeout

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def connect(self, url: str) -> WebsocketsConn:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        try:
            ws = await connect(
                url,
                compression=None,
                max_size=None,
                ping_interval=None,
                open_timeout=self._timeout,
                close_timeout=5,
            )
        except InvalidStatus as err:
            raise ExchangeError(f"handshake refused: HTTP {err.response.status_code}") from None
        except TimeoutError:
            raise ExchangeError("connect timeout") from None
        except OSError as err:
            raise ExchangeError(f"connect failed: {_oserr(err)}") from None
        except Exception as err:
            raise ExchangeError(f"connect failed: {type(err).__name__}") from None
        return WebsocketsConn(ws)


class WebsocketsConn:
    __slots__ = ("ws",)

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    async def send(self, data: str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self.ws.send(data)
        except ConnectionClosed as err:
            raise ExchangeError(f"closed by server: {_ws_code(err)}") from None

    async def recv(self) -> str:
        from websockets.exceptions import ConnectionClosed

        try:
            data = await self.ws.recv()
        except ConnectionClosed as err:
            raise ExchangeError(f"closed by server: {_ws_code(err)}") from None
        if not isinstance(data, str):
            raise ExchangeError("binary frame from server")
        return data

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()

    def abort(self) -> None:
        self.ws.transport.abort()

    @property
    def closed(self) -> bool:
        from websockets.protocol import State

        return bool(self.ws.state is not State.OPEN)


class RawClient:
    """A lean RFC 6455 client on asyncio.Protocol: the cheapest way to drive a server.

    HTTP/1.1 upgrade with a random key (the accept value is checked), masked frames with a
    random mask, pings answered, fragmented messages reassembled, close handshake done.
    No extensions (real clients negotiate none with the mailbox server).
    """

    name = "raw"

    def __init__(self, connect_timeout: float) -> None:
        self._timeout = connect_timeout

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def connect(self, url: str, source: str | None = None) -> RawConn:
        """A WebSocket to `url`, from the loopback address `source` when given."""
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        loop = asyncio.get_running_loop()
        key = base64.b64encode(_rand.randbytes(16)).decode()
        request = (
            f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
        try:
            async with asyncio.timeout(self._timeout):
                _, proto = await loop.create_connection(
                    lambda: RawConn(key),
                    host,
                    port,
                    local_addr=(source, 0) if source else None,
                )
                proto.transport.write(request)
                await proto.opened
        except TimeoutError:
            raise ExchangeError("connect timeout") from None
        except OSError as err:
            raise ExchangeError(f"connect failed: {_oserr(err)}") from None
        return proto


_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class RawConn(asyncio.Protocol):
    def __init__(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._accept = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest())
        self.transport: Any = None
        self.opened: asyncio.Future[None] = loop.create_future()
        self._buf = b""
        self._upgraded = False
        self._inbox: deque[str] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._fragments: list[bytes] = []
        self._frag_op = 0
        self.close_code: int | None = None
        self.closed = False
        self._error: str | None = None
        self._close_sent = False
        self._lost: asyncio.Future[None] = loop.create_future()

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        if not self._upgraded:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self._buf = buf
                return
            head = buf[:end].decode("latin-1").split("\r\n")
            buf = buf[end + 4 :]
            status = head[0].split(" ", 2)
            code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if code != 101:
                self._fail_open(ExchangeError(f"handshake refused: HTTP {code}"))
                return
            if headers.get("sec-websocket-accept", "").encode() != self._accept:
                self._fail_open(ExchangeError("handshake: bad Sec-WebSocket-Accept"))
                return
            self._upgraded = True
            if not self.opened.done():
                self.opened.set_result(None)
        # frames (server frames are never masked)
        pos, n = 0, len(buf)
        while n - pos >= 2:
            b0 = buf[pos]
            b1 = buf[pos + 1]
            length = b1 & 0x7F
            hdr = 2
            if length == 126:
                if n - pos < 4:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 4], "big")
                hdr = 4
            elif length == 127:
                if n - pos < 10:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                hdr = 10
            if b1 & 0x80:
                self._protocol_error("masked frame from server")
                return
            if n - pos < hdr + length:
                break
            payload = buf[pos + hdr : pos + hdr + length]
            pos += hdr + length
            self._frame(b0 & 0x80, b0 & 0x0F, payload)
        self._buf = buf[pos:] if pos < n else b""

    def _frame(self, fin: int, op: int, payload: bytes) -> None:
        if op == 0x1 or op == 0x2 or op == 0x0:
            if op:
                self._frag_op = op
                self._fragments = [payload]
            else:
                self._fragments.append(payload)
            if not fin:
                return
            data = b"".join(self._fragments) if len(self._fragments) > 1 else self._fragments[0]
            self._fragments = []
            if self._frag_op == 0x2:
                self._error = "binary frame from server"
            else:
                self._inbox.append(data.decode("utf-8"))
            self._wake()
        elif op == 0x9:  # ping
            self._write(0xA, payload)
        elif op == 0x8:  # close
            self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
            if not self._close_sent:
                self._write(0x8, payload[:2])
                self._close_sent = True
            self.closed = True
            self.transport.close()
            self._wake()

    def _protocol_error(self, what: str) -> None:
        self._error = what
        self.transport.abort()
        self._wake()

    def _fail_open(self, err: Exception) -> None:
        if not self.opened.done():
            self.opened.set_exception(err)
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.opened.done():
            self.opened.set_exception(ExchangeError("connect failed: closed during handshake"))
        if not self._lost.done():
            self._lost.set_result(None)
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _write(self, op: int, payload: bytes) -> None:
        n = len(payload)
        mask = _rand.randbytes(4)
        if n < 126:
            head = bytes((0x80 | op, 0x80 | n))
        elif n < 65536:
            head = bytes((0x80 | op, 0x80 | 126)) + n.to_bytes(2, "big")
        else:
            head = bytes((0x80 | op, 0x80 | 127)) + n.to_bytes(8, "big")
        if n:
            full = (mask * (n // 4 + 1))[:n]
            masked = (int.from_bytes(payload, "big") ^ int.from_bytes(full, "big")).to_bytes(
                n, "big"
            )
        else:
            masked = b""
        self.transport.write(head + mask + masked)

    # the connection interface
    async def send(self, data: str) -> None:
        if self.closed:
            raise ExchangeError(f"closed by server: {self.close_code or 'no close frame'}")
        self._write(0x1, data.encode())

    async def recv(self) -> str:
        while True:
            if self._inbox:
                return self._inbox.popleft()
            if self._error is not None:
                raise ExchangeError(self._error)
            if self.closed:
                raise ExchangeError(f"closed by server: {self.close_code or 'no close frame'}")
            self._waiter = self._loop.create_future()
            await self._waiter
            self._waiter = None

    async def close(self) -> None:
        if self.closed:
            return
        if not self._close_sent:
            self._close_sent = True
            self._write(0x8, (1000).to_bytes(2, "big"))
        # wait (bounded) for the server's close frame and its closing the TCP connection
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            async with asyncio.timeout(5.0):
                await asyncio.shield(self._lost)
        self.transport.abort()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def _ws_code(err: Any) -> object:
    rcvd = getattr(err, "rcvd", None)
    return rcvd.code if rcvd is not None else "no close frame"


def make_client(name: str, connect_timeout: float) -> Any:
    if name == "websockets":
        return WebsocketsClient(connect_timeout)
    if name == "aiohttp":
        return AiohttpClient(connect_timeout)
    return RawClient(connect_timeout)


# --- one exchange -------------------------------------------------------------------

_rand = random.Random()


def _hex(nbytes: int) -> str:
    return _rand.randbytes(nbytes).hex()


def _msg_id() -> str:
    return f"{_rand.getrandbits(16):04x}"


@dataclass(slots=True)
class SidePlan:
    side: str
    bodies: dict[str, str]  # phase -> body
    ids: dict[str, str] = field(default_factory=dict)  # phase -> id sent
    sent_at: dict[str, float] = field(default_factory=dict)  # phase -> perf_counter


@dataclass(slots=True)
class Stats:
    completed: list[tuple[float, float]] = field(default_factory=list)  # (end wall, seconds)
    delivery: list[tuple[float, float]] = field(default_factory=list)  # (wall, seconds)
    #: (wall, seconds) from a side's connect until its welcome: where an exchange waits
    #: before the server takes it on (a server's accept and handshake under load)
    connecting: list[tuple[float, float]] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    failed_at: list[float] = field(default_factory=list)
    started: int = 0
    unfinished: int = 0


def plan_side(app_messages: int, app_bytes: int) -> SidePlan:
    bodies = {"pake": _hex(80), "version": _hex(150)}
    for i in range(app_messages):
        bodies[str(i)] = _hex(app_bytes)
    return SidePlan(_hex(5), bodies)


async def run_side(
    client: Any,
    url: str,
    me: SidePlan,
    peer: SidePlan,
    nameplate: asyncio.Future[str],
    mailbox: asyncio.Future[str],
    allocator: bool,
    stats: Stats,
    timed_phases: frozenset[str],
) -> None:
    perf = time.perf_counter
    connect_started = perf()
    conn = await client.connect(url)
    try:
        dumps = orjson.dumps
        loads = orjson.loads
        send = conn.send
        recv = conn.recv

        async def put(frame: dict[str, Any]) -> None:
            frame["id"] = _msg_id()
            await send(dumps(frame).decode())

        async def add(phase: str) -> None:
            mid = _msg_id()
            me.ids[phase] = mid
            me.sent_at[phase] = perf()
            await send(
                dumps({"type": "add", "phase": phase, "body": me.bodies[phase], "id": mid}).decode()
            )

        async def expect(mtype: str) -> dict[str, Any]:
            while True:
                msg = loads(await recv())
                t = msg.get("type")
                if t == mtype:
                    return msg  # type: ignore[no-any-return]
                if t == "ack":
                    continue
                if t == "error":
                    raise ExchangeError(f"server error: {msg.get('error')}")
                raise ExchangeError(f"unexpected {t} while waiting for {mtype}")

        await expect("welcome")
        stats.connecting.append((time.time(), perf() - connect_started))
        await put(
            {"type": "bind", "appid": APPID, "side": me.side, "client_version": CLIENT_VERSION}
        )
        if allocator:
            await put({"type": "allocate"})
            name = (await expect("allocated"))["nameplate"]
            nameplate.set_result(name)
        else:
            name = await nameplate
        await put({"type": "claim", "nameplate": name})
        mbox = (await expect("claimed"))["mailbox"]
        if mailbox.done():
            if mailbox.result() != mbox:
                raise ExchangeError("sides got different mailboxes")
        else:
            mailbox.set_result(mbox)
        await put({"type": "open", "mailbox": mbox})
        await add("pake")

        app_phases = [p for p in me.bodies if p not in ("pake", "version")]
        want_peer = set(peer.bodies)
        want_echo = set(me.bodies)
        released = closing = False
        release_sent = False
        while True:
            msg = loads(await recv())
            t = msg.get("type")
            if t == "ack":
                continue
            if t == "message":
                side = msg.get("side")
                phase = msg.get("phase")
                if side == me.side:
                    if phase not in want_echo:
                        raise ExchangeError("duplicate or unknown echo")
                    if msg.get("body") != me.bodies[phase] or msg.get("id") != me.ids[phase]:
                        raise ExchangeError("echo altered")
                    want_echo.discard(phase)
                elif side == peer.side:
                    if phase not in want_peer:
                        raise ExchangeError("duplicate or unknown peer message")
                    if msg.get("body") != peer.bodies[phase] or msg.get("id") != peer.ids.get(
                        phase
                    ):
                        raise ExchangeError("peer message altered")
                    want_peer.discard(phase)
                    if phase in timed_phases:
                        stats.delivery.append((time.time(), perf() - peer.sent_at[phase]))
                    if not release_sent:
                        release_sent = True
                        await put({"type": "release", "nameplate": name})
                    if phase == "pake":
                        await add("version")
                    elif phase == "version":
                        for p in app_phases:
                            await add(p)
                else:
                    raise ExchangeError("message from a third side")
            elif t == "released":
                released = True
            elif t == "closed":
                if not closing:
                    raise ExchangeError("closed before close")
                break
            elif t == "error":
                raise ExchangeError(f"server error: {msg.get('error')}")
            else:
                raise ExchangeError(f"unexpected {t}")
            if not closing and released and not want_peer and not want_echo:
                closing = True
                await put({"type": "close", "mailbox": mbox, "mood": "happy"})
    except BaseException:
        conn.abort()
        raise
    await conn.close()


async def exchange(
    client: Any,
    url: str,
    stats: Stats,
    app_messages: int,
    app_bytes: int,
    timeout: float,
    url_b: str | None = None,
) -> None:
    """One exchange: side A on `url`, side B on `url_b` (default: `url` too)."""
    loop = asyncio.get_running_loop()
    a = plan_side(app_messages, app_bytes)
    b = plan_side(app_messages, app_bytes)
    nameplate: asyncio.Future[str] = loop.create_future()
    mailbox: asyncio.Future[str] = loop.create_future()
    timed = frozenset(p for p in a.bodies if p != "pake")
    started = time.perf_counter()
    stats.started += 1
    ta = loop.create_task(run_side(client, url, a, b, nameplate, mailbox, True, stats, timed))
    tb = loop.create_task(
        run_side(client, url_b or url, b, a, nameplate, mailbox, False, stats, timed)
    )
    try:
        async with asyncio.timeout(timeout):
            _done, pending = await asyncio.wait({ta, tb}, return_when=asyncio.FIRST_EXCEPTION)
    except TimeoutError:
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)
        stats.failures["exchange timeout"] += 1
        stats.failed_at.append(time.time())
        return
    except asyncio.CancelledError:
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)
        raise
    for t in pending:
        t.cancel()
    results = await asyncio.gather(ta, tb, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        real = [e for e in errors if not isinstance(e, asyncio.CancelledError)]
        err = real[0] if real else errors[0]
        label = str(err) if isinstance(err, ExchangeError) else f"client bug: {err!r}"
        stats.failures[label] += 1
        stats.failed_at.append(time.time())
        return
    stats.completed.append((time.time(), time.perf_counter() - started))


def _raise_nofile() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1 << 20
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def mode_exchanges(args: argparse.Namespace) -> dict[str, Any]:
    """Closed loop: `concurrency` slots, each running one exchange after another.

    Warm-up lasts at least --warmup seconds and until every slot has finished (or failed)
    one exchange, the steady state, but at most --warmup-max. With --sync the generator
    then prints {"steady": ...} and reads the window's start time from stdin, so that
    several generator processes and the caller's CPU readings share one window.
    """
    loop = asyncio.get_running_loop()
    client = make_client(args.client, args.connect_timeout)
    await client.start()
    stats = Stats()
    start = args.start_at
    window = [math.inf, math.inf]
    first_done = 0
    all_first = asyncio.Event()

    async def worker(i: int) -> None:
        nonlocal first_done
        # spread the first starts over `ramp` seconds: clients do not arrive in lockstep
        delay = start - time.time() + (args.ramp * i / max(1, args.concurrency))
        await asyncio.sleep(max(0.0, delay))
        first = True
        while time.time() < window[1]:
            await exchange(
                client, args.url, stats, args.messages, args.app_bytes, args.timeout, args.url_b
            )
            if first:
                first = False
                first_done += 1
                if first_done == args.concurrency:
                    all_first.set()

    workers = [loop.create_task(worker(i)) for i in range(args.concurrency)]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, start + args.warmup_max - time.time())):
            await all_first.wait()
    await asyncio.sleep(max(0.0, start + args.warmup - time.time()))
    steady = time.time()
    if args.sync:
        line = orjson.dumps({"steady": steady, "slots_done": first_done}).decode()
        print(line, flush=True)
        reply = await loop.run_in_executor(None, sys.stdin.readline)
        window_start = float(reply) if reply.strip() else time.time()
    else:
        window_start = steady
    window_end = window_start + args.measure
    window[:] = [window_start, window_end]
    await asyncio.sleep(max(0.0, window_start - time.time()))
    cpu0 = _cpu()
    await asyncio.sleep(max(0.0, window_end - time.time()))
    cpu1 = _cpu()
    _, pending = await asyncio.wait(workers, timeout=args.drain)
    stats.unfinished = len(pending)
    for w in pending:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    await client.stop()
    in_window = [d for end, d in stats.completed if window_start <= end <= window_end]
    deliveries = [d for when, d in stats.delivery if window_start <= when <= window_end]
    connecting = [d for when, d in stats.connecting if window_start <= when <= window_end]
    return {
        "client": client.name,
        "concurrency": args.concurrency,
        "warmup_seconds": steady - start,
        "slots_done_at_steady": first_done,
        "window": [window_start, window_end],
        "completed_in_window": len(in_window),
        "completed_total": len(stats.completed),
        "started": stats.started,
        "failed": sum(stats.failures.values()),
        "failed_in_window": sum(1 for t in stats.failed_at if window_start <= t <= window_end),
        "failures": dict(stats.failures),
        "unfinished": stats.unfinished,
        "exchange_seconds": in_window,
        "delivery_seconds": deliveries,
        "connect_seconds": connecting,
        "generator_cpu": cpu1 - cpu0,
    }


async def mode_idle(args: argparse.Namespace) -> None:
    """Hold idle, bound connections, step by step, reporting after each step."""
    client = make_client(args.client, args.connect_timeout)
    await client.start()
    conns: list[Any] = []
    failures: Counter[str] = Counter()
    readers: list[asyncio.Task[None]] = []
    dead = 0
    gate = asyncio.Semaphore(args.parallel)
    loop = asyncio.get_running_loop()

    async def reader(conn: Any) -> None:
        nonlocal dead
        with contextlib.suppress(Exception):
            while True:
                await conn.recv()
        dead += 1

    async def one() -> None:
        async with gate:
            try:
                conn = await client.connect(args.url)
                first = orjson.loads(await asyncio.wait_for(conn.recv(), args.connect_timeout))
                if first.get("type") != "welcome":
                    raise ExchangeError(f"no welcome: {first.get('type')}")
                frame = {
                    "type": "bind",
                    "appid": APPID,
                    "side": _hex(5),
                    "client_version": CLIENT_VERSION,
                    "id": _msg_id(),
                }
                await conn.send(orjson.dumps(frame).decode())
            except ExchangeError as err:
                failures[str(err)] += 1
                return
            except TimeoutError:
                failures["welcome timeout"] += 1
                return
            conns.append(conn)
            readers.append(loop.create_task(reader(conn)))

    steps = [int(s) for s in args.steps.split(",") if s]
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    deadline = time.time() + args.time_limit
    for target in steps:
        started = time.time()
        while len(conns) < target and time.time() < deadline:
            need = target - len(conns)
            batch = [loop.create_task(one()) for _ in range(need)]
            await asyncio.wait(batch, timeout=max(0.1, deadline - time.time()))
            if sum(failures.values()) >= args.max_failures:
                break
        await asyncio.sleep(args.settle)
        held = len(conns) - dead
        print(
            orjson.dumps(
                {
                    "target": target,
                    "opened": len(conns),
                    "held": held,
                    "dead": dead,
                    "failures": dict(failures),
                    "seconds": round(time.time() - started, 2),
                    "time_limited": len(conns) < target and time.time() >= deadline,
                }
            ).decode(),
            flush=True,
        )
        await stdin.readline()
        if held < target or sum(failures.values()) >= args.max_failures:
            break
        if time.time() >= deadline:
            break
    for conn in conns:
        conn.abort()
    for r in readers:
        r.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    await client.stop()


def crowd_source(member: int, sources: str) -> str | None:
    """The loopback address crowd member `member` (1, 2, ...) connects from.

    `many` (the default): an address of its own, 127.1.0.1 onwards, as a crowd of people
    is; `one`: 127.0.0.1 for all (one big NAT). Each TCP connection from one address to
    the server's one port takes an ephemeral port of that address: 15,000 members from
    127.0.0.1 take half of Linux's default range (32768-60999, and connect() prefers the
    even half), after which every new connection the exchanges make from 127.0.0.1 costs
    the generator's kernel a long search for a free port (seen: 0.8 of a core in `sys`
    at 15,000, the exchange rate down to 0.4x while the server idled).
    """
    if sources == "one":
        return None
    return f"127.1.{member // 250}.{member % 250 + 1}"


async def mode_crowd(args: argparse.Namespace) -> None:
    """Hold a crowd of waiting senders, step by step, reporting after each step.

    Each member does what `wormhole send` does before its peer comes: connect, `welcome`,
    `bind`, `allocate`, `claim` the nameplate it got, `open` the mailbox, `add` `pake`,
    and then waits (reading whatever comes: acks and its own echo). After each step it
    prints one JSON line and waits for a line on stdin, like `idle`.
    """
    client = make_client(args.client, args.connect_timeout)
    await client.start()
    conns: list[Any] = []
    failures: Counter[str] = Counter()
    readers: list[asyncio.Task[None]] = []
    dead = 0
    gate = asyncio.Semaphore(args.parallel)
    loop = asyncio.get_running_loop()

    async def reader(conn: Any) -> None:
        nonlocal dead
        with contextlib.suppress(Exception):
            while True:
                await conn.recv()
        dead += 1

    async def expect(conn: Any, mtype: str) -> dict[str, Any]:
        while True:
            msg = orjson.loads(await conn.recv())
            t = msg.get("type")
            if t == mtype:
                return msg  # type: ignore[no-any-return]
            if t == "error":
                raise ExchangeError(f"server error: {msg.get('error')}")
            if t not in ("ack", "message"):
                raise ExchangeError(f"unexpected {t} while waiting for {mtype}")

    async def put(conn: Any, frame: dict[str, Any]) -> None:
        frame["id"] = _msg_id()
        await conn.send(orjson.dumps(frame).decode())

    joined = 0

    async def one() -> None:
        nonlocal joined
        async with gate:
            conn = None
            joined += 1
            try:
                conn = await client.connect(args.url, crowd_source(joined, args.sources))
                async with asyncio.timeout(args.connect_timeout):
                    await expect(conn, "welcome")
                    side = _hex(5)
                    await put(
                        conn,
                        {
                            "type": "bind",
                            "appid": APPID,
                            "side": side,
                            "client_version": CLIENT_VERSION,
                        },
                    )
                    await put(conn, {"type": "allocate"})
                    name = (await expect(conn, "allocated"))["nameplate"]
                    await put(conn, {"type": "claim", "nameplate": name})
                    mbox = (await expect(conn, "claimed"))["mailbox"]
                    await put(conn, {"type": "open", "mailbox": mbox})
                    await put(conn, {"type": "add", "phase": "pake", "body": _hex(80)})
                    while True:  # the echo of its own pake: the server has it
                        msg = await expect(conn, "message")
                        if msg.get("side") == side:
                            break
            except ExchangeError as err:
                failures[str(err)] += 1
                if conn is not None:
                    conn.abort()
                return
            except TimeoutError:
                failures["crowd member timeout"] += 1
                if conn is not None:
                    conn.abort()
                return
            conns.append(conn)
            readers.append(loop.create_task(reader(conn)))

    steps = [int(s) for s in args.steps.split(",") if s]
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    deadline = time.time() + args.time_limit
    for target in steps:
        started = time.time()
        while len(conns) - dead < target and time.time() < deadline:
            need = target - (len(conns) - dead)
            batch = [loop.create_task(one()) for _ in range(need)]
            await asyncio.wait(batch, timeout=max(0.1, deadline - time.time()))
            if sum(failures.values()) >= args.max_failures:
                break
        await asyncio.sleep(args.settle)
        held = len(conns) - dead
        print(
            orjson.dumps(
                {
                    "target": target,
                    "opened": len(conns),
                    "held": held,
                    "dead": dead,
                    "failures": dict(failures),
                    "seconds": round(time.time() - started, 2),
                    "time_limited": held < target and time.time() >= deadline,
                }
            ).decode(),
            flush=True,
        )
        line = await stdin.readline()
        if not line or sum(failures.values()) >= args.max_failures:
            break
    for conn in conns:
        conn.abort()
    for r in readers:
        r.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    await client.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    ex = sub.add_parser("exchanges")
    ex.add_argument("--url", required=True)
    ex.add_argument("--url-b", help="side B of every exchange connects here (default: --url)")
    ex.add_argument("--concurrency", type=int, default=10)
    ex.add_argument("--start-at", type=float, default=0.0, help="wall-clock start (default now)")
    ex.add_argument("--warmup", type=float, default=2.0, help="least warm-up seconds")
    ex.add_argument("--warmup-max", type=float, default=30.0, help="most warm-up seconds")
    ex.add_argument("--sync", action="store_true", help="report steady state, read window")
    ex.add_argument("--measure", type=float, default=8.0)
    ex.add_argument("--drain", type=float, default=20.0)
    ex.add_argument("--ramp", type=float, default=1.0)
    ex.add_argument("--messages", type=int, default=1, help="application messages per side")
    ex.add_argument("--app-bytes", type=int, default=200)
    ex.add_argument("--timeout", type=float, default=60.0, help="one exchange at most")
    ex.add_argument("--connect-timeout", type=float, default=30.0)
    ex.add_argument("--output", help="write the JSON here instead of stdout")
    ex.add_argument("--client", choices=["raw", "aiohttp", "websockets"], default="raw")
    idle = sub.add_parser("idle")
    idle.add_argument("--url", required=True)
    idle.add_argument("--steps", default="1000,10000")
    idle.add_argument("--parallel", type=int, default=32, help="handshakes at once")
    idle.add_argument("--settle", type=float, default=2.0)
    idle.add_argument("--max-failures", type=int, default=500)
    idle.add_argument("--time-limit", type=float, default=120.0)
    idle.add_argument("--connect-timeout", type=float, default=30.0)
    idle.add_argument("--client", choices=["raw", "aiohttp", "websockets"], default="raw")
    crowd = sub.add_parser("crowd")
    crowd.add_argument("--url", required=True)
    crowd.add_argument("--steps", default="2000,8000,15000")
    crowd.add_argument("--parallel", type=int, default=32, help="members joining at once")
    crowd.add_argument("--settle", type=float, default=2.0)
    crowd.add_argument("--max-failures", type=int, default=500)
    crowd.add_argument("--time-limit", type=float, default=300.0)
    crowd.add_argument("--connect-timeout", type=float, default=30.0)
    crowd.add_argument("--client", choices=["raw"], default="raw")
    crowd.add_argument(
        "--sources",
        choices=["many", "one"],
        default="many",
        help="many: each member from a loopback address of its own; one: all from 127.0.0.1",
    )
    args = parser.parse_args()
    _raise_nofile()
    try:
        import uvloop

        run: Any = uvloop.run
    except ImportError:
        run = asyncio.run
    if args.mode == "exchanges":
        if not args.start_at:
            args.start_at = time.time() + 0.2
        result = run(mode_exchanges(args))
        data = orjson.dumps(result)
        if args.output:
            with open(args.output, "wb") as f:
                f.write(data)
        else:
            sys.stdout.buffer.write(data + b"\n")
            sys.stdout.flush()
    elif args.mode == "crowd":
        run(mode_crowd(args))
    else:
        run(mode_idle(args))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
