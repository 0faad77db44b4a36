"""Who holds what: stored bytes, live nameplates and mailboxes, per client address.

Per-connection limits reset with every new connection, so an address that reconnects
could hold any amount. The ledger charges each nameplate, mailbox and message body to
the client address that created it (after trusted-proxy resolution) for as long as it
is stored, and refunds it when the mailbox is closed by every side or pruned. It also
carries the server's own storage state, which the server sets: the disk below its
free-space watermark (only small bodies are stored then), or commits failing (nothing
new is taken until they succeed again).

An empty owner ("") is nobody's: channels loaded after a restart under `--blur-usage`
(no address is written to disk then) count towards the server's total only.
"""

from __future__ import annotations

from collections import Counter

from pigeonhole.protocol import limits as lim
from pigeonhole.protocol.errors import ProtocolError
from pigeonhole.protocol.limits import Limits


class Ledger:
    __slots__ = (
        "_limits",
        "bytes_by",
        "disk_low",
        "mailboxes_by",
        "nameplates_by",
        "storage_down",
        "stored_bytes",
    )

    def __init__(self, limits: Limits | None = None) -> None:
        self._limits = limits or Limits()
        #: decoded body bytes stored, in all and per owner
        self.stored_bytes = 0
        self.bytes_by: Counter[str] = Counter()
        self.nameplates_by: Counter[str] = Counter()
        self.mailboxes_by: Counter[str] = Counter()
        #: set by the server: free disk below the watermark; commits failing
        self.disk_low = False
        self.storage_down = False

    @property
    def limits(self) -> Limits:
        return self._limits

    @limits.setter
    def limits(self, limits: Limits) -> None:
        """New bounds (a reload): what is held stays; what comes next is checked by them."""
        self._limits = limits

    # -- checks (before anything changes) ------------------------------------------

    def check_nameplate(self, owner: str) -> None:
        limit = self._limits.max_nameplates_per_address
        if owner and self.nameplates_by[owner] >= limit:
            raise ProtocolError(f"{lim.ADDRESS_NAMEPLATES} ({limit})")

    def check_mailbox(self, owner: str) -> None:
        limit = self._limits.max_mailboxes_per_address
        if owner and self.mailboxes_by[owner] >= limit:
            raise ProtocolError(f"{lim.ADDRESS_MAILBOXES} ({limit})")

    def check_body(self, owner: str, size: int) -> None:
        limits = self._limits
        if self.disk_low and size > limits.low_disk_max_body_bytes:
            raise ProtocolError(f"{lim.DISK_LOW} ({size} > {limits.low_disk_max_body_bytes} bytes)")
        if self.stored_bytes + size > limits.max_stored_bytes:
            raise ProtocolError(f"{lim.SERVER_BYTES} ({limits.max_stored_bytes} bytes)")
        limit = limits.max_stored_bytes_per_address
        if owner and self.bytes_by[owner] + size > limit:
            raise ProtocolError(f"{lim.ADDRESS_BYTES} ({limit} bytes)")

    # -- charges and refunds ---------------------------------------------------------

    def charge_nameplate(self, owner: str) -> None:
        if owner:
            self.nameplates_by[owner] += 1

    def refund_nameplate(self, owner: str) -> None:
        _take(self.nameplates_by, owner, 1)

    def charge_mailbox(self, owner: str) -> None:
        if owner:
            self.mailboxes_by[owner] += 1

    def refund_mailbox(self, owner: str) -> None:
        _take(self.mailboxes_by, owner, 1)

    def charge_bytes(self, owner: str, size: int) -> None:
        self.stored_bytes += size
        if owner:
            self.bytes_by[owner] += size

    def refund_bytes(self, owner: str, size: int) -> None:
        self.stored_bytes -= size
        _take(self.bytes_by, owner, size)

    def clear(self) -> None:
        self.stored_bytes = 0
        self.bytes_by.clear()
        self.nameplates_by.clear()
        self.mailboxes_by.clear()


def _take(counts: Counter[str], owner: str, amount: int) -> None:
    """Subtract, forgetting an owner at zero (an address seen once is not kept)."""
    if not owner:
        return
    left = counts[owner] - amount
    if left > 0:
        counts[owner] = left
    else:
        counts.pop(owner, None)
