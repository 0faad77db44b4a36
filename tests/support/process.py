"""Helpers for tests that start processes: a free port, a started process that is waited
on until it answers and stopped by its PID, and `pigeonhole serve` as one of them; a
process tree killed by PID (`descendants`, `kill_tree`) and the end of an output (`tail`).

Every suite starts its servers through `Service` (any program) or `ServeProcess`
(`python -m pigeonhole serve`), so a failure to start always shows the process's output.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from signal import SIGKILL, SIGTERM
from types import TracebackType

#: the command line of the package under test, run by the tests' own interpreter
PIGEONHOLE = (sys.executable, "-m", "pigeonhole")
#: the tests' interpreter's directory, where the venv's programs (wormhole, twist, ...) are
BIN = Path(sys.executable).parent
#: lines of a process's output shown when it fails to start
TAIL_LINES = 30


def free_port() -> int:
    """A loopback TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str, timeout: float = 5.0) -> int:
    """The status of GET `url`, never through a proxy; 0 when nothing answers."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def accepts_tcp(port: int) -> bool:
    """Something accepts TCP connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (state, parent, ...); None: no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet."""
    fields = _stat(pid)
    return fields is None or fields[0] == "Z"


def parent(pid: int) -> int | None:
    """The parent's PID, or None if the process is gone."""
    fields = _stat(pid)
    return int(fields[1]) if fields is not None else None


def stop(
    proc: subprocess.Popen[bytes] | None, sig: int = SIGTERM, timeout: float = 15.0
) -> int | None:
    """Send `sig` to a process we started and wait; SIGKILL after `timeout`. Its status."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class InteropError(AssertionError):
    """A scenario failed; the message carries the clients' output."""


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def descendants(pid: int) -> list[int]:
    """PIDs below `pid`, deepest first (from /proc/PID/task/*/children)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except (OSError, ValueError):
            continue
        for kid in kids:
            found.extend(descendants(kid))
            found.append(kid)
    return found


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process we started and everything it started, by PID."""
    if proc.poll() is not None:
        return
    for pid in [*descendants(proc.pid), proc.pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


class Service:
    """A program a test starts, restartable: its stdout and stderr are appended to `log`
    (each start marked `=== start HH:MM:SS ===`), `start` returns once `ready()` is true
    and fails with the output if it exits or is not ready in time; stopped by its PID.
    `with service:` starts it (unless started) and stops it with SIGTERM."""

    #: seconds `start` waits for it to be ready unless told
    start_timeout = 20.0

    def __init__(
        self,
        argv: Sequence[str],
        log: Path,
        ready: Callable[[], bool],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        name: str = "",
    ) -> None:
        self.argv = list(argv)
        self.log = log
        self.ready = ready
        self.env = env
        self.cwd = cwd
        self.name = name or Path(self.argv[0]).name
        self.proc: subprocess.Popen[bytes] | None = None
        self._output_from = 0

    def start(self, timeout: float | None = None) -> Service:
        """Start it and wait until it is ready; SIGKILL and fail after `timeout` s
        (`start_timeout` unless given)."""
        assert not self.running, f"{self.name} is already running"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"=== start {time.strftime('%H:%M:%S')} ===\n".encode())
            out.flush()
            self._output_from = out.tell()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=None if self.env is None else dict(self.env),
                cwd=self.cwd,
            )
        self._wait_ready(self.proc, self.start_timeout if timeout is None else timeout)
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(self._why(f"exited with {proc.returncode} while starting"))
            if self.ready():
                return
            if time.monotonic() > deadline:
                self.stop(SIGKILL)
                raise AssertionError(self._why(f"was not ready within {timeout:g} s"))
            time.sleep(0.05)

    def _why(self, what: str) -> str:
        lines = self.log_text().rstrip().splitlines()[-TAIL_LINES:]
        return f"{self.name} {what}:\n" + "\n".join(lines)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def signal(self, sig: int) -> None:
        """Send `sig` without waiting (see `wait`)."""
        assert self.proc is not None, f"{self.name} was never started"
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 15.0) -> int:
        """Wait for it to exit; its status."""
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.wait(timeout)

    def stop(self, sig: int = SIGTERM, timeout: float = 15.0) -> int | None:
        """Send `sig` to its PID and wait; SIGKILL after `timeout`. Its status."""
        return stop(self.proc, sig, timeout)

    def log_text(self) -> str:
        """Everything in the log, every start's output."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def output(self) -> str:
        """What the latest start has written so far."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self._output_from)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> Service:
        if self.proc is None:
            self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class ServeProcess(Service):
    """`python -m pigeonhole serve ARGS`, ready when GET `ready_path` on 127.0.0.1:`port`
    answers 200. The port is a free one unless given; `--port` is passed unless
    `port_option` is false (the port then comes from the environment or a file)."""

    def __init__(
        self,
        log: Path,
        *args: str,
        port: int | None = None,
        port_option: bool = True,
        ready_path: str = "/",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port() if port is None else port
        listen = ["--port", str(self.port)] if port_option else []
        super().__init__(
            [*PIGEONHOLE, "serve", *listen, *args],
            log,
            self._answers,
            env=env,
            name=f"pigeonhole serve (port {self.port})",
        )
        self.ready_path = ready_path

    def _answers(self) -> bool:
        return http_status(f"http://127.0.0.1:{self.port}{self.ready_path}", timeout=2) == 200

    @property
    def url(self) -> str:
        """Its mailbox's WebSocket URL."""
        return f"ws://127.0.0.1:{self.port}/v1"
