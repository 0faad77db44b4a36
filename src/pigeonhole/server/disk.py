"""Free space in the data directory, against the operator's watermark.

Below the watermark the server keeps working for real exchanges (their messages are
small) but stores no big bodies (protocol/ledger.py), `/health` answers 503 with the
reason, and entering and leaving the state is logged once each. Checked every second
(one `statvfs`, a few microseconds) and at once after a failed commit.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("pigeonhole.server")


class DiskWatch:
    __slots__ = ("_path", "free", "low", "watermark")

    def __init__(self, path: Path, watermark: int) -> None:
        self._path = path
        self.watermark = watermark
        #: bytes free to unprivileged writers at the last check (None: never checked)
        self.free: int | None = None
        self.low = False

    def check(self) -> bool:
        """Measure; return whether the disk is below the watermark (logs a change)."""
        try:
            stat = os.statvfs(self._path)
        except OSError as err:
            log.error("cannot measure free disk space in %s: %s", self._path, err)
            return self.low
        self.free = stat.f_bavail * stat.f_frsize
        low = self.free < self.watermark
        if low != self.low:
            self.low = low
            if low:
                log.warning(
                    "disk space low: %d bytes free in %s, below the watermark of %d:"
                    " only small messages are stored until space returns",
                    self.free,
                    self._path,
                    self.watermark,
                )
            else:
                log.warning(
                    "disk space back: %d bytes free in %s (watermark %d)",
                    self.free,
                    self._path,
                    self.watermark,
                )
        return low

    @property
    def reason(self) -> str:
        return f"disk space low: {self.free} bytes free, watermark {self.watermark}"
