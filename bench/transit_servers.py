"""The relays bench/transit_relay.py compares Pigeonhole's with, each run as a process of
its own: `trivial` (asyncio streams, pause/resume), `splice` (blocking splice in two
threads per pair, no bounds) and `pigeonhole` (the relay alone, on asyncio's default loop,
with its standalone WebSocket listener).

    python bench/transit_servers.py KIND --port PORT [--ws-port PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import threading

CHUNK = 256 * 1024


async def serve_trivial(port: int) -> None:
    """Pairs by the first line, then copies with pause/resume through asyncio streams."""
    waiting: dict[bytes, asyncio.StreamWriter] = {}
    partners: dict[asyncio.StreamWriter, asyncio.Future[asyncio.StreamWriter]] = {}

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        if not line:
            writer.close()
            return
        key = line.split(b" ")[2]  # the token: the sides differ
        other = waiting.pop(key, None)
        if other is None:
            waiting[key] = writer
            met = partners[writer] = asyncio.get_running_loop().create_future()
            partner = await met
        else:
            partners.pop(other).set_result(writer)
            partner = other
            for w in (writer, other):
                w.write(b"ok\n")
        await pump(reader, partner)

    server = await asyncio.start_server(handle, "127.0.0.1", port, limit=CHUNK)
    await server.serve_forever()


def serve_splice(port: int) -> None:
    """The ceiling: blocking splice through a pipe in two threads per pair, no bounds."""
    listener = socket.create_server(("127.0.0.1", port), backlog=1024)
    waiting: dict[bytes, socket.socket] = {}
    lock = threading.Lock()

    def pump(src: socket.socket, dst: socket.socket) -> None:
        r, w = os.pipe()
        with contextlib.suppress(OSError):
            while n := os.splice(src.fileno(), w, 1 << 20):
                while n:
                    n -= os.splice(r, dst.fileno(), n)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        os.close(r), os.close(w)

    def handshake(conn: socket.socket) -> None:
        line = b""
        while not line.endswith(b"\n"):
            byte = conn.recv(1)  # one byte at a time: nothing after the line is read
            if not byte:
                conn.close()
                return
            line += byte
        key = line.split(b" ")[2]  # the token: the sides differ
        with lock:
            other = waiting.pop(key, None)
            if other is None:
                waiting[key] = conn
                return
        for s in (conn, other):
            s.sendall(b"ok\n")
        threading.Thread(target=pump, args=(conn, other), daemon=True).start()
        threading.Thread(target=pump, args=(other, conn), daemon=True).start()

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handshake, args=(conn,), daemon=True).start()


async def serve_pigeonhole(port: int, ws_port: int) -> None:
    from pigeonhole.transit import TransitConfig, TransitRelay
    from pigeonhole.transit.ws_listener import serve_websocket

    relay = TransitRelay(TransitConfig(max_connections_per_address=100_000))
    await relay.start("127.0.0.1", [port])
    await serve_websocket(relay, "127.0.0.1", ws_port)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["trivial", "splice", "pigeonhole"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ws-port", type=int, default=0)
    args = parser.parse_args()
    if args.kind == "splice":
        serve_splice(args.port)
    elif args.kind == "trivial":
        asyncio.run(serve_trivial(args.port))
    else:
        asyncio.run(serve_pigeonhole(args.port, args.ws_port))
