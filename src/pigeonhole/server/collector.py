"""The garbage collector's pauses, by generation: each one stalls every connection.

`COLLECTOR` counts the collections of this process and the seconds they took (through
`gc.callbacks`, installed once per process when a server starts), for the figures
`pigeonhole_gc_collections_total` and `pigeonhole_gc_seconds_total`: what an operator
reads when the loop stalls, and what the benchmarks read beside a crowd
(`bench/crowd_paired.py`).
"""

from __future__ import annotations

import gc
import time
from typing import Any

GENERATIONS = 3


class CollectorTime:
    """Collections and their seconds since this process installed it, per generation."""

    def __init__(self) -> None:
        self.collections = [0] * GENERATIONS
        self.seconds = [0.0] * GENERATIONS
        self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self.collections[generation] += 1
        self.seconds[generation] += time.perf_counter() - self._started

    def by_generation(self, values: list[int] | list[float]) -> dict[tuple[str, ...], float]:
        return {(str(g),): float(v) for g, v in enumerate(values)}


#: the one per process (gc.callbacks is the process's)
COLLECTOR = CollectorTime()
