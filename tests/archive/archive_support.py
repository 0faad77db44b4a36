"""Shared test helpers for the archive: a fake clock and the live-archive handle."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.endpoint import ArchiveService

#: a fixed "now" for tests: 2023-11-14T22:13:20Z
T0 = 1_700_000_000


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class LiveArchive:
    """A running archive app: its URL, config, clock and service."""

    url: str
    config: ArchiveConfig
    clock: FakeClock
    service: ArchiveService


RunArchive = Callable[..., AbstractAsyncContextManager[LiveArchive]]
