"""Storage trouble, contained: failing commits and a full disk refuse new data, close nothing.

A failed commit sets the server refusing new writes until the committer, which writes the
failed batch again, succeeds (store/group_commit.py; a node of a shared store retries its
batch the same way). Below the free-space watermark of the data directory (server/disk.py)
only small bodies are stored. No connection is closed for either; `/health` answers 503
with the reason meanwhile, and the archive refuses new envelopes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pigeonhole.config import ServerConfig
from pigeonhole.protocol.ledger import Ledger
from pigeonhole.protocol.limits import STORAGE_DOWN
from pigeonhole.server.disk import DiskWatch
from pigeonhole.server.log_summary import LogSummary
from pigeonhole.server.metrics import Metrics

log = logging.getLogger("pigeonhole.server")


class StorageHealth:
    def __init__(
        self,
        config: ServerConfig,
        ping: Callable[[], None],
        ledger: Ledger,
        metrics: Metrics,
        log_summary: LogSummary,
    ) -> None:
        #: raises when the database does not answer (the store's `ping`)
        self._ping = ping
        self._ledger = ledger
        self._metrics, self._log_summary = metrics, log_summary
        #: how many commits in a row have failed
        self.failing = 0
        self.disk = DiskWatch(config.data_dir, config.disk_free_watermark)
        #: why commits fail, while they do (None: they do not)
        self.error: str | None = None

    def failed(self, err: BaseException) -> None:
        """A commit failed and was rolled back; the committer writes it again later.

        Memory already holds the batch's changes and nobody was told they were stored:
        the replies that wait for it wait on, and no connection is closed. Until a batch
        succeeds, commands that would store something are refused (protocol/session.py).
        """
        self._metrics.storage_failures += 1
        self.failing += 1
        self.error = str(err)
        self._ledger.storage_down = True
        self.check_disk()
        if self.failing == 1:
            log.error(
                "storage failing: %s; refusing new writes and writing the batch again"
                " until it succeeds",
                err,
            )
        else:
            self._log_summary.note(
                "commit failed", f"commit failed again: {err}", {}, logging.ERROR
            )

    def recovered(self) -> None:
        log.warning("storage recovered: the failed batch is written, new writes are taken")
        self.failing = 0
        self.error = None
        self._ledger.storage_down = False
        self.check_disk()

    def check_disk(self) -> None:
        """Free space against the watermark: below it, no big bodies are stored."""
        self._ledger.disk_low = self.disk.check()

    def problem(self) -> str | None:
        """Why /health answers 503 now, or None when it answers `ok`."""
        try:
            self._ping()
        except Exception as err:
            return f"database unavailable: {err}"
        if self.error is not None:
            return f"storage failing: {self.error}"
        if self.disk.low:
            return self.disk.reason
        return None

    def refusing(self) -> str | None:
        """Why nothing new is stored now (the archive refuses envelopes then), or None."""
        if self.error is not None:
            return STORAGE_DOWN
        if self.disk.low:
            return "server is low on disk space: nothing is archived now"
        return None
