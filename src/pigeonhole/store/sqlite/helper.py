"""Writes and fdatasyncs in a helper process, answered through a pipe the loop watches.

Why a process: with a worker thread, the thread needs the GIL back the moment its
fdatasync returns, while the busy loop thread holds it for up to the switch interval,
and the completion reaches the loop only by `call_soon_threadsafe`: a GIL hand-off both
ways per commit, and the loop stalls while the worker holds it. Writing the transaction
on the loop thread instead (as `--commit-sync thread` and `loop` do) costs the loop the
SQLite work of every batch, in one piece that no socket is read during. The helper
(`helper_main.py`) has its own interpreter, free to run on the other core: the loop
sends it the batch's effects (one request) and its answer is one more readable pipe
among the sockets. Measured in `bench/README.md` ("What each design choice bought").

The helper is started with the server and stopped with it. If it dies, the requests it
owed fail (the committer writes the batch again, store/group_commit.py) and the next
request starts a new one. A refused batch is answered with the reason (`e`, a 2-byte
length, the text), which becomes the error the server reports on /health. It ends by
itself when the server's end of the pipe closes, so a killed server leaves no helper
behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections import deque
from pathlib import Path

from pigeonhole.protocol.effects import Effect
from pigeonhole.store.errors import StoreHelperError
from pigeonhole.store.group_commit import Done
from pigeonhole.store.sqlite.helper_main import encode_effects

log = logging.getLogger("pigeonhole.store")


class StoreHelper:
    """Sends batches to the helper; each `start`'s `done` runs on the loop, in order."""

    def __init__(self, channel_path: Path, usage_path: Path) -> None:
        self._argv = [
            sys.executable,
            "-m",
            "pigeonhole.store.sqlite.helper_main",
            str(channel_path),
            str(usage_path),
        ]
        self._proc: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests = -1
        self._answers = -1
        #: callbacks of the requests sent, in order (the helper answers in order)
        self._waiting: deque[Done] = deque()
        #: answer bytes read but not yet whole
        self._unread = bytearray()
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
        # the same interpreter and environment as the server: it imports this package
        proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        self._requests, self._answers = proc.stdin.fileno(), proc.stdout.fileno()
        self._unread = bytearray()
        os.set_blocking(self._answers, False)
        loop.add_reader(self._answers, self._readable)
        self._proc, self._loop = proc, loop
        self.started += 1

    def start(self, effects: list[Effect], done: Done) -> None:
        """Write `effects` as one transaction and sync; `done(error)` comes later."""
        if self._proc is None:
            self._spawn()
        self._waiting.append(done)
        request = memoryview(encode_effects(effects))
        try:
            while request:  # a pipe takes 64 KiB at once; a bigger batch waits for room
                request = request[os.write(self._requests, request) :]
        except OSError as err:  # the helper is gone: its answers will not come
            self._lost(StoreHelperError(f"store helper is gone: {err}"))

    def _readable(self) -> None:
        try:
            answers = os.read(self._answers, 4096)
        except BlockingIOError:
            return
        except OSError as err:
            self._lost(StoreHelperError(f"store helper pipe failed: {err}"))
            return
        if not answers:
            self._lost(StoreHelperError("store helper exited"))
            return
        self._unread += answers
        for error in self._answers_in(self._unread):
            if not self._waiting:
                log.error("store helper answered a request never made")
                break
            self._waiting.popleft()(error)

    def _answers_in(self, unread: bytearray) -> list[StoreHelperError | None]:
        """Take the whole answers off the front of `unread`: `k`, or `e` and its reason."""
        answers: list[StoreHelperError | None] = []
        while unread:
            if unread[0] == ord("k"):
                answers.append(None)
                del unread[:1]
                continue
            if len(unread) < 3:
                break
            end = 3 + int.from_bytes(unread[1:3], "big")
            if len(unread) < end:
                break
            reason = unread[3:end].decode("utf-8", "replace") or "store helper failed"
            answers.append(StoreHelperError(reason))
            del unread[:end]
        return answers

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
        """Stop the helper (after what was asked was answered: `drain` first)."""
        self._stop(timeout=5.0)
