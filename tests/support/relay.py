"""Pigeonhole's transit relay and Dilation clients for the tests that force real clients
through a relay.

- `ServedRelay`: `pigeonhole serve`'s own relay (`--transit-port`, a free 127.0.0.1 port);
  its usage records are read from the server's usage database (the `transit` table).
- `SplitNets`: two private namespaces (see `NetNS`), one per side of a transfer, each with
  forwarders to the mailbox and to the relay, so no direct path exists between the sides.
- `Fowld`: the `fowld` daemon (fowl, on magic-wormhole's Dilation) in a namespace, driven
  through its JSON-lines stdin/stdout protocol.
- `EchoServer`: echoes one connection on a socket (a listener inside a namespace).
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import tests.support.process as process_support
from tests.support.interop_servers import RelayPort, relay_records
from tests.support.netns import Forwarder, Net, NetNS
from tests.support.process import BIN, InteropError, kill_tree, tail

FOWLD = BIN / "fowld"
#: a usage record as the relay writes it: started, total_time, waiting_time, total_bytes, mood
Record = dict[str, Any]


def _read_lines(stream: IO[bytes], into: Callable[[str], None]) -> threading.Thread:
    """A daemon thread that hands each line of `stream` to `into` until EOF."""

    def pump() -> None:
        for raw in stream:
            into(raw.decode(errors="replace").rstrip("\n"))

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


class ServedRelay:
    """The relay `pigeonhole serve` hosts, on a server of its own, stopped by PID."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path) -> None:
        self.port = process_support.free_port()
        self.usage_db = workdir / "data" / "usage.sqlite"
        self.server = process_support.ServeProcess(
            workdir / "serve.log",
            "--host",
            self.host,
            "--data-dir",
            str(workdir / "data"),
            "--transit-port",
            str(self.port),
        )
        self.server.start()

    def records(self) -> list[Record]:
        """Every usage record committed so far, oldest first, with the reference's keys."""
        return relay_records(self.usage_db, "transit")

    def log_text(self) -> str:
        return self.server.log_text()

    def stop(self) -> int | None:
        """SIGTERM: the relay drains, the server exits 0."""
        return self.server.stop()


def wait_for_happy(
    records: Callable[[], list[Record]], since: int, min_bytes: int, timeout: float = 20.0
) -> list[Record]:
    """The `happy` records after the first `since` with at least `min_bytes`; waits for one
    (a pair's record is written when both its connections have closed)."""
    deadline = time.monotonic() + timeout
    while True:
        new = records()[since:]
        happy = [r for r in new if r["mood"] == "happy" and r["total_bytes"] >= min_bytes]
        if happy or time.monotonic() > deadline:
            if not happy:
                raise AssertionError(
                    f"no happy pair of at least {min_bytes} bytes in the relay's usage: {new}"
                )
            return happy
        time.sleep(0.1)


class SplitNets:
    """Two namespaces, `send` and `receive`, each forwarding to one mailbox and relay."""

    def __init__(self, workdir: Path, relay: RelayPort) -> None:
        self.forwarder = Forwarder()
        self._spaces: list[NetNS] = []
        try:
            self.send = self._net(workdir / "ns-send", relay)
            self.receive = self._net(workdir / "ns-receive", relay)
        except BaseException:
            self.close()
            raise

    def _net(self, workdir: Path, relay: RelayPort) -> Net:
        workdir.mkdir(parents=True, exist_ok=True)
        netns = NetNS(workdir)
        self._spaces.append(netns)
        return Net(relay, self.forwarder, netns)

    def close(self) -> None:
        for netns in self._spaces:
            netns.close()
        self.forwarder.close()


class Fowld:
    """`fowld` in a namespace under `timeout`; JSON commands in, JSON messages out."""

    def __init__(self, net: Net, mailbox: str, workdir: Path, timeout: float) -> None:
        workdir.mkdir(parents=True)
        self.err_path = workdir / "stderr.log"
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        argv = ["timeout", "-k", "5", f"{timeout:g}", str(FOWLD), "--mailbox", mailbox]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                net.wrap(argv, workdir), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, cwd=workdir,
            )  # fmt: skip
        assert self.proc.stdout is not None
        _read_lines(self.proc.stdout, self._parse)

    def _parse(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = {"kind": "unparsed", "line": line}
        self.messages.put(message)

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        """The next message of `kind` (earlier ones of other kinds are kept in `seen`)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                why = f"fowld sent no {kind!r} in {timeout} s\n{self.describe()}"
                raise InteropError(why) from None
            self.seen.append(message)
            if message.get("kind") == kind:
                return message
            if message.get("kind") in ("error", "closed"):
                raise InteropError(f"fowld said {message} before {kind!r}\n{self.describe()}")

    def describe(self) -> str:
        stderr = self.err_path.read_text(errors="replace")
        return f"messages: {self.seen}\nstderr:\n{tail(stderr)}"

    def close(self, timeout: float = 15.0) -> int:
        """Ask for a session close, wait for the exit; then the process tree is killed."""
        with contextlib.suppress(OSError, ValueError):
            self.send(kind="session-close", timeout=5)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return -1
        finally:
            kill_tree(self.proc)


class EchoServer:
    """Echoes what the first connection on `listener` sends, in a daemon thread."""

    def __init__(self, listener: socket.socket, timeout: float = 60.0) -> None:
        self.listener = listener
        self.listener.settimeout(timeout)
        self.echoed = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(self.listener.gettimeout())
                while data := conn.recv(1 << 16):
                    conn.sendall(data)
                    self.echoed += len(data)
        except OSError as exc:
            self.error = exc

    def close(self) -> None:
        self.listener.close()
        self._thread.join(5)
