"""fdatasync in a helper process, answered through a pipe the event loop watches.

Why a process and not a thread: a worker thread needs the GIL back the moment its
fdatasync returns, and the busy loop thread holds it for up to the switch interval; then
the completion reaches the loop by `call_soon_threadsafe`. Each commit costs a GIL
hand-off both ways, and the loop stalls while the worker holds the GIL. A helper process
has its own interpreter: the loop writes one byte to ask, and the answer is one more
readable pipe among its sockets. Measured in `bench/README.md` ("The sync helper").

The helper (`sync_helper.py`) is started with the store and stopped with it. If it dies,
the syncs it owed fail (the server's storage-failure path takes over) and the next sync
starts a new one. It ends by itself when the server's end of the pipe closes, so a killed
server leaves no helper behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("pigeonhole.store")

HELPER = Path(__file__).with_name("sync_helper.py")

Done = Callable[[BaseException | None], None]


class SyncHelperError(OSError):
    """The helper could not sync (it reported an error, or it is gone)."""


class ProcessSync:
    """Asks the helper to fdatasync `paths`; each `start`'s `done` runs on the loop."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = [str(p) for p in paths]
        self._proc: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answers = -1
        #: callbacks of the requests sent, in order (the helper answers in order)
        self._waiting: deque[Done] = deque()
        #: helpers started so far (a restart after a crash counts)
        self.started = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def open(self) -> None:
        """Start the helper now (else the first `start` does), on the running loop."""
        if self._proc is None:
            self._spawn()

    def _spawn(self) -> None:
        loop = asyncio.get_running_loop()
        # -I: the helper needs only the standard library, and nothing from the environment
        proc = subprocess.Popen(
            [sys.executable, "-I", str(HELPER), *self._paths],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        assert proc.stdout is not None
        self._answers = proc.stdout.fileno()
        os.set_blocking(self._answers, False)
        loop.add_reader(self._answers, self._readable)
        self._proc, self._loop = proc, loop
        self.started += 1

    def start(self, done: Done) -> None:
        """Ask for one sync of everything written so far; `done(error)` comes later."""
        if self._proc is None:
            self._spawn()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        self._waiting.append(done)
        try:
            os.write(proc.stdin.fileno(), b"s")
        except OSError as err:  # the helper is gone: its answers will not come
            self._lost(SyncHelperError(f"sync helper is gone: {err}"))

    def _readable(self) -> None:
        try:
            answers = os.read(self._answers, 4096)
        except BlockingIOError:
            return
        except OSError as err:
            self._lost(SyncHelperError(f"sync helper pipe failed: {err}"))
            return
        if not answers:
            self._lost(SyncHelperError("sync helper exited"))
            return
        for answer in answers:
            if not self._waiting:
                log.error("sync helper answered a request never made")
                break
            done = self._waiting.popleft()
            done(None if answer == ord("k") else SyncHelperError("fdatasync failed"))

    def _lost(self, error: BaseException) -> None:
        """The helper is gone: fail what it owed; the next `start` starts another."""
        log.error("%s", error)
        self._stop(timeout=1.0)
        waiting, self._waiting = self._waiting, deque()
        for done in waiting:
            done(error)

    def _stop(self, timeout: float) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._answers)
        if proc.stdin is not None:
            proc.stdin.close()  # end of input: the helper exits
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def close(self) -> None:
        """Stop the helper (after the syncs asked for were answered: `drain` first)."""
        self._stop(timeout=5.0)
