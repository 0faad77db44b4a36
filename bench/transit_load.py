"""The load for bench/transit_relay.py: transit pairs driven from worker processes that cost
the relay's machine as little as possible, so what is seen is the relay, not the load.

Each pair's sender and receiver live in different workers (pair p: sender in worker
p % N, receiver in worker (p + 1) % N), one thread per connection with blocking sockets.
A TCP sender `sendfile`s a file in the page cache (no copy through Python); a WebSocket
sender `sendfile`s a file of prebuilt masked binary frames. A TCP receiver `splice`s what
arrives into /dev/null; a WebSocket receiver reads each frame's header and splices its
payload to /dev/null. Every worker first opens its connections and waits for `ok`, then
waits for "go" from the parent, which samples the relay's CPU then and once every
receiver has seen its end (EOF, or the relay's close frame): connection set-up is outside
the measured window. Senders stop at a deadline or a byte cap, whichever comes first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import socket
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

#: bytes in the file senders send from (then from its start again)
FILE_BYTES = 8 * 1024 * 1024
#: bytes per blocking `sendfile` call (the deadline is checked between calls)
SEND_BYTES = 1024 * 1024
MASK = b"\x12\x34\x56\x78"
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


@dataclass(frozen=True)
class Job:
    """One worker's share of a row: which pairs it sends and receives for."""

    worker: int
    workers: int
    transport: str  # "tcp" or "ws"
    port: int
    ws_path: str
    tokens: list[str]
    bytes_per_pair: int
    ws_frame: int


def hello(token: str, side: str) -> bytes:
    return f"please relay {token} for side {side}\n".encode()


def masked_frame(payload: bytes, opcode: int = 0x2) -> bytes:
    """A client frame (FIN set, masked with MASK)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    key = (MASK * (n // 4 + 1))[:n]
    return head + MASK + bytes(a ^ b for a, b in zip(payload, key, strict=True))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data), socket.MSG_WAITALL)
        if not chunk:
            raise EOFError
        data += chunk
    return data


def ws_open(port: int, path: str) -> socket.socket:
    """A WebSocket connection after the upgrade (the answer read up to its blank line)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while not head.endswith(b"\r\n\r\n"):  # byte by byte: nothing after the head is read
        head += recv_exact(sock, 1)
    if b" 101 " not in head.split(b"\r\n", 1)[0]:
        raise OSError(f"no upgrade: {head[:80]!r}")
    return sock


def ws_frame_head(sock: socket.socket) -> tuple[int, int]:
    """The next server frame's (opcode, payload length); server frames are not masked."""
    b0, b1 = recv_exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", recv_exact(sock, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", recv_exact(sock, 8))
    return b0 & 0x0F, n


class Sink:
    """Moves n bytes (or up to EOF) from a socket to /dev/null through a pipe."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.w, F_SETPIPE_SZ, 1024 * 1024)
        self.null = os.open(os.devnull, os.O_WRONLY)

    def drop(self, fd: int, n: int | None) -> int:
        """Bytes moved (fewer than n only at EOF)."""
        moved = 0
        while n is None or moved < n:
            want = 1 << 20 if n is None else min(1 << 20, n - moved)
            got = os.splice(fd, self.w, want)
            if not got:
                break
            moved += got
            while got:
                got -= os.splice(self.r, self.null, got)
        return moved

    def close(self) -> None:
        for fd in (self.r, self.w, self.null):
            os.close(fd)


def connect(job: Job, token: str, side: str) -> socket.socket:
    if job.transport == "tcp":
        sock = socket.create_connection(("127.0.0.1", job.port))
        sock.sendall(hello(token, side))
    else:
        sock = ws_open(job.port, job.ws_path)
        sock.sendall(masked_frame(hello(token, side)))
    return sock


def await_ok(job: Job, sock: socket.socket) -> None:
    if job.transport == "tcp":
        got = recv_exact(sock, 3)
    else:
        opcode, n = ws_frame_head(sock)
        got = recv_exact(sock, n) if opcode == 0x2 else b""
    if got != b"ok\n":
        raise OSError(f"no ok: {got!r}")


def send(job: Job, sock: socket.socket, source: Source, deadline: float) -> int:
    """Send whole units (a WebSocket frame, or any byte) until the deadline or the cap;
    then end: FIN (TCP), or a close frame and the relay's close read (WebSocket)."""
    sent = offset = 0
    unit = source.unit
    per_call = max(unit, SEND_BYTES // unit * unit)
    with contextlib.suppress(OSError):
        while sent + unit <= job.bytes_per_pair and time.monotonic() < deadline:
            count = min(per_call, source.size - offset, job.bytes_per_pair - sent)
            count -= count % unit
            done = 0
            while done < count:
                done += os.sendfile(sock.fileno(), source.fd, offset + done, count - done)
            sent += count
            offset = (offset + count) % source.size
        if job.transport == "tcp":
            sock.shutdown(socket.SHUT_WR)
        else:
            sock.sendall(masked_frame(struct.pack("!H", 1000), opcode=0x8))
        while sock.recv(65536):  # until the relay closes
            pass
    sock.close()
    return sent // unit * source.payload


def receive(job: Job, sock: socket.socket) -> int:
    """Payload bytes until the end (EOF; for WebSocket the relay's close frame)."""
    sink = Sink()
    got = 0
    try:
        if job.transport == "tcp":
            got = sink.drop(sock.fileno(), None)
        else:
            while True:
                opcode, n = ws_frame_head(sock)
                if opcode == 0x8:
                    recv_exact(sock, n)
                    sock.sendall(masked_frame(struct.pack("!H", 1000), opcode=0x8))
                    while sock.recv(65536):
                        pass
                    break
                got += sink.drop(sock.fileno(), n)
    except (OSError, EOFError):
        pass
    finally:
        sink.close()
        sock.close()
    return got


@dataclass(frozen=True)
class Source:
    """A file in memory to send from: whole `unit`s of `payload` stream bytes each."""

    fd: int
    size: int
    unit: int
    payload: int


def payload_file(job: Job) -> Source:
    if job.transport == "tcp":
        block, unit, payload = os.urandom(1024 * 1024), 1, 1
    else:
        block = masked_frame(os.urandom(job.ws_frame))
        unit, payload = len(block), job.ws_frame
    fd, name = tempfile.mkstemp(prefix="transit-load-", dir="/dev/shm")
    os.unlink(name)
    size = 0
    while size + len(block) <= max(FILE_BYTES, len(block)):
        size += os.write(fd, block)
    return Source(fd, size, unit, payload)


def work(job: Job, parent: Connection) -> None:
    """Open this worker's sides, say ready, wait for go, run, report the figures."""
    mine: list[tuple[str, socket.socket]] = []
    for p, token in enumerate(job.tokens):
        if p % job.workers == job.worker:
            mine.append(("send", connect(job, token, "a" * 16)))
        if (p + 1) % job.workers == job.worker:
            mine.append(("recv", connect(job, token, "b" * 16)))
    for _, sock in mine:
        await_ok(job, sock)
    source = payload_file(job)
    parent.send("ready")
    deadline = parent.recv()
    before = resource.getrusage(resource.RUSAGE_SELF)
    sent = received = 0
    lock = threading.Lock()

    def run(role: str, sock: socket.socket) -> None:
        nonlocal sent, received
        if role == "send":
            n = send(job, sock, source, deadline)
            with lock:
                sent += n
        else:
            n = receive(job, sock)
            with lock:
                received += n

    threads = [threading.Thread(target=run, args=pair, daemon=True) for pair in mine]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    parent.send((sent, received, cpu))
