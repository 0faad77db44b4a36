"""A private network namespace for the interop clients, and the forwarding into it.

- `NetNS` + `Forwarder`: a private net+mount+pid namespace (see ns_holder.py) with
  only `lo`, an /etc/hosts mapping transit.magic-wormhole.io to 127.0.0.1, and
  listeners inside it (mailbox: same port as the server; transit relay: 4001) that
  the test process forwards to the server and relay on the host's loopback.
  wormhole-william always dials transit.magic-wormhole.io:4001 and advertises only
  non-loopback direct hints, so file transfers with it need this.
- `Net`: where clients run (in the namespace, or directly when namespaces are not
  available: then file transfers involving wormhole-william are skipped).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.interop_servers import RelayPort, Server
from tests.support.process import descendants, kill_tree
from tests.support.wormhole_clients import Kind, require

HERE = Path(__file__).resolve().parent
# wormhole-william 1.0.6 quirk 2 (see client-interop-notes.md): a sender whose relay
# `ok` arrives before it waits for it may close its own connection. Holding back
# the relay's first reply on each connection avoids that race.
RELAY_FIRST_REPLY_DELAY = 0.5
NS_TRANSIT_PORT = 4001


class Forwarder:
    """TCP forwarding on an asyncio loop in a daemon thread of the test process.

    Accepts on sockets that live in the client namespace and connects to
    127.0.0.1:PORT in the host's network namespace.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._thread = threading.Thread(target=self._run, name="interop-forwarder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def listen(self, sock: socket.socket, target_port: int, first_reply_delay: float = 0.0) -> None:
        handler = functools.partial(self._handle, target_port, first_reply_delay)
        fut = asyncio.run_coroutine_threadsafe(self._start(sock, handler), self.loop)
        fut.result(10)

    async def _start(
        self,
        sock: socket.socket,
        handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object],
    ) -> None:
        self._servers.append(await asyncio.start_server(handler, sock=sock))  # type: ignore[arg-type]

    async def _handle(
        self,
        target_port: int,
        first_reply_delay: float,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
            except OSError:
                writer.close()
                return
            writers = (writer, up_writer)
            await asyncio.gather(
                self._pump(reader, up_writer, 0.0, writers),
                self._pump(up_reader, writer, first_reply_delay, writers),
            )
            for w in writers:
                w.close()
        finally:
            self._tasks.discard(task)

    @staticmethod
    async def _pump(
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        first_delay: float,
        writers: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        first = True
        try:
            while data := await src.read(65536):
                if first and first_delay:
                    await asyncio.sleep(first_delay)
                first = False
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except (OSError, RuntimeError):
            # one side reset or vanished: tear both down so the other side sees it
            for w in writers:
                w.close()

    def close(self) -> None:
        async def shutdown() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class NetNS:
    """A private net+mount+pid namespace whose PID 1 is ns_holder.py."""

    def __init__(self, workdir: Path) -> None:
        hosts = workdir / "hosts"
        original = Path("/etc/hosts").read_text()
        hosts.write_text(original.rstrip("\n") + "\n127.0.0.1 transit.magic-wormhole.io\n")
        self._lock = threading.Lock()
        self._ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_path = workdir / "netns.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    "unshare",
                    "--net",
                    "--mount",
                    "--pid",
                    "--fork",
                    "--kill-child",
                    sys.executable,
                    str(HERE / "ns_holder.py"),
                    str(child.fileno()),
                    str(hosts),
                ],
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        child.close()
        self._ctl.settimeout(20)
        try:
            msg = self._ctl.recv(4096)
        except OSError as exc:
            msg = f"no answer: {exc}".encode()
        if msg != b"ready":
            self.close()
            text = self.log_path.read_text(errors="replace").strip()
            reason = msg.decode(errors="replace") or "holder exited"
            raise OSError(f"{reason}; unshare exit {self.proc.returncode}: {text}")
        kids = descendants(self.proc.pid)
        if len(kids) != 1:
            self.close()
            raise OSError(f"cannot find the namespace's PID 1 below unshare ({kids})")
        self.holder_pid = kids[0]

    def listen(self, port: int) -> socket.socket:
        """A socket listening on 127.0.0.1:`port` inside the namespace (non-blocking)."""
        sock = self._socket(str(port), f"namespace listener on port {port}")
        sock.setblocking(False)
        return sock

    def connect(self, port: int, timeout: float = 30.0) -> socket.socket:
        """A TCP connection to 127.0.0.1:`port` inside the namespace (with `timeout`)."""
        sock = self._socket(f"connect {port}", f"namespace connection to port {port}")
        sock.settimeout(timeout)
        return sock

    def _socket(self, request: str, what: str) -> socket.socket:
        """Ask the holder for a socket made inside the namespace (see ns_holder.py)."""
        with self._lock:
            self._ctl.send(request.encode())
            msg, fds, _flags, _addr = socket.recv_fds(self._ctl, 4096, 1)
        if msg != b"ok" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise OSError(f"{what}: {msg.decode(errors='replace')}")
        os.set_inheritable(fds[0], False)
        return socket.socket(fileno=fds[0])

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        # `cd` inside rather than nsenter --wd: --wd opens the directory before
        # entering the mount namespace, and then (gVisor) getcwd() fails and a
        # rename into the cwd gives EXDEV.
        return [
            "nsenter", f"--target={self.holder_pid}", "--net", "--mount", "--pid", "--",
            "sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(cwd), *argv,
        ]  # fmt: skip

    def close(self) -> None:
        self._ctl.close()  # the holder sees EOF and exits; the kernel kills the rest
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)


class Net:
    """Where the clients run and which mailbox/transit addresses they get."""

    def __init__(
        self,
        relay: RelayPort,
        forwarder: Forwarder | None,
        netns: NetNS | None,
        no_netns_reason: str = "",
    ) -> None:
        self.relay = relay
        self.forwarder = forwarder
        self.netns = netns
        self.no_netns_reason = no_netns_reason
        self._forwarded: set[int] = set()
        self._lock = threading.Lock()
        if netns is not None:
            assert forwarder is not None
            forwarder.listen(netns.listen(NS_TRANSIT_PORT), relay.port, RELAY_FIRST_REPLY_DELAY)

    @property
    def in_netns(self) -> bool:
        return self.netns is not None

    @property
    def transit_helper(self) -> str:
        port = NS_TRANSIT_PORT if self.netns is not None else self.relay.port
        return f"tcp:127.0.0.1:{port}"

    def mailbox_url(self, server: Server) -> str:
        if self.netns is None:
            return server.url
        assert self.forwarder is not None
        with self._lock:
            if server.port not in self._forwarded:
                self.forwarder.listen(self.netns.listen(server.port), server.port)
                self._forwarded.add(server.port)
        return f"ws://127.0.0.1:{server.port}/v1"

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        return list(argv) if self.netns is None else self.netns.wrap(argv, cwd)

    def require_files(self, *kinds: Kind) -> None:
        """Skip a file transfer between `kinds` that cannot run here."""
        require(*kinds)
        if "ww" in kinds and self.netns is None:
            pytest.skip(
                "file transfers with wormhole-william need a private network namespace "
                "(it dials transit.magic-wormhole.io:4001 and advertises non-loopback "
                f"hints), unavailable here: {self.no_netns_reason}"
            )
