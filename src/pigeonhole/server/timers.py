"""The server's periodic jobs (pruning, usage samples, sweeps, the status rings' tick).

Each runs every so many seconds, the first time after one interval, never at startup:
reconnecting clients get their grace period (unlike the reference, §3.7). A job that
fails is logged, and runs again at its next interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("pigeonhole.server")

#: (seconds between runs, the job: a function, or a coroutine function)
Job = tuple[float, Callable[[], object]]


def start_jobs(loop: asyncio.AbstractEventLoop, jobs: list[Job]) -> list[asyncio.Task[None]]:
    """One task per job (cancel them to stop)."""
    return [loop.create_task(_every(seconds, action)) for seconds, action in jobs]


async def _every(seconds: float, action: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            result = action()
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("periodic task failed")
