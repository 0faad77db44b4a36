"""What the archive holds, per client and in all, against its quotas (pure; no I/O).

The archive shares the data directory's disk with the mailbox, so without bounds one
client posting cheap envelopes (proof of work 0.001: about a thousand tiny hashes per MiB)
could fill the disk and push the mailbox into its low-disk mode. Each envelope's bytes are
charged to the client that posted it (an IPv6 client: its prefix, pigeonhole/clients.py)
when it is accepted, before its commit, so posts in flight count; bytes that turn out to
be duplicates are given back after the commit, and retention gives back what it deletes.
An empty owner ("") is nobody's: rows stored under `--blur-usage` count towards the total
only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pigeonhole.archive import errors


class ArchiveQuota:
    __slots__ = ("bytes_by", "max_bytes", "max_bytes_per_address", "total")

    def __init__(self, max_bytes_per_address: int, max_bytes: int) -> None:
        #: 0 means no limit, for either
        self.max_bytes_per_address = max_bytes_per_address
        self.max_bytes = max_bytes
        self.total = 0
        self.bytes_by: Counter[str] = Counter()

    def load(self, held: Iterable[tuple[str, int]]) -> None:
        """Start from what the archive file holds: (owner, bytes) rows, owners regrouped."""
        self.total = 0
        self.bytes_by.clear()
        for owner, size in held:
            self.charge(owner, size)

    def reserve(self, owner: str, size: int) -> errors.EnvelopeRefused | None:
        """Charge `size` bytes to `owner`, or say which quota it would break."""
        if self.max_bytes and self.total + size > self.max_bytes:
            return errors.EnvelopeRefused("server_quota", errors.CODE_OTHER, errors.SERVER_QUOTA)
        limit = self.max_bytes_per_address
        if limit and owner and self.bytes_by[owner] + size > limit:
            return errors.EnvelopeRefused("address_quota", errors.CODE_OTHER, errors.ADDRESS_QUOTA)
        self.charge(owner, size)
        return None

    def charge(self, owner: str, size: int) -> None:
        self.total += size
        if owner:
            self.bytes_by[owner] += size

    def refund(self, owner: str, size: int) -> None:
        """Give bytes back, forgetting an owner at zero (an address seen once is not kept)."""
        self.total = max(0, self.total - size)
        if owner and owner in self.bytes_by:
            left = self.bytes_by[owner] - size
            if left > 0:
                self.bytes_by[owner] = left
            else:
                del self.bytes_by[owner]
