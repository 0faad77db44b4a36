"""Progress indication while Spark works: numbered steps, plus live task counts on a terminal.

`ConsoleProgress` prints a line when a step starts (`[3/14] hourly_summary`) and one with
the time it took when it ends (`[3/14] hourly_summary (4.2 s)`; on a terminal the second
replaces the first). On a terminal it also redraws, twice a second, how many tasks of the
running Spark stages are done, read from the SparkContext's status tracker: a few cheap
calls to the driver's in-memory status store, no Spark job.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, TextIO

from pyspark import SparkContext


class Progress(Protocol):
    """What the report job tells about its progress."""

    def start(self, steps: int) -> None: ...

    def step(self, label: str) -> None: ...

    def finish(self) -> None: ...


class SilentProgress:
    """Progress that shows nothing (library use and tests)."""

    def __init__(self) -> None:
        self.labels: list[str] = []

    def start(self, steps: int) -> None:
        self.labels = []

    def step(self, label: str) -> None:
        self.labels.append(label)

    def finish(self) -> None:
        return None


class ConsoleProgress:
    """Step lines on `stream`; live task counts too when `stream` is a terminal."""

    def __init__(self, context: SparkContext, stream: TextIO, interval: float = 0.5) -> None:
        self._context, self._stream, self._interval = context, stream, interval
        self._steps, self._done, self._label = 0, 0, ""
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._live = stream.isatty()

    def start(self, steps: int) -> None:
        self._steps, self._done = steps, 0
        if self._live:
            self._thread = threading.Thread(target=self._poll, name="progress", daemon=True)
            self._thread.start()

    def step(self, label: str) -> None:
        with self._lock:
            self._end_line()
            self._done += 1
            self._label, self._started = label, time.monotonic()
            self._stream.write(f"[{self._done}/{self._steps}] {label}")
            self._stream.flush()
            if not self._live:
                self._stream.write("\n")

    def finish(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._end_line()

    def _end_line(self) -> None:
        if not self._done:
            return
        took = time.monotonic() - self._started
        line = f"[{self._done}/{self._steps}] {self._label} ({took:.1f} s)"
        if self._live:
            self._stream.write(f"\r{line}\033[K\n")
        else:
            self._stream.write(f"{line}\n")
        self._stream.flush()

    def _poll(self) -> None:
        tracker = self._context.statusTracker()
        while not self._stop.wait(self._interval):
            infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            done = sum(i.numCompletedTasks for i in infos if i)
            total = sum(i.numTasks for i in infos if i)
            with self._lock:
                if self._done and not self._stop.is_set():
                    tasks = f" · Spark tasks {done}/{total}" if total else ""
                    self._stream.write(f"\r[{self._done}/{self._steps}] {self._label}{tasks}\033[K")
                    self._stream.flush()
