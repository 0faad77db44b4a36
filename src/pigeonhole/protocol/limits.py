"""The limits and quotas the protocol enforces (pure; time passed in).

Per connection (commands, creations), per mailbox (messages, bytes), and quotas that
outlive a connection: what one client address holds (stored bytes, live nameplates and
mailboxes) and what the whole server stores (protocol/ledger.py keeps the counts).
Defaults leave real clients untouched (a 100 KB `wormhole send --text` is one ~200 KB
hex body, 100 KB stored; most exchanges store a few KB) while bounding what one abusive
client can store or cost, however often it reconnects.
"""

from __future__ import annotations

from dataclasses import dataclass

from pigeonhole.protocol.settings import setting

# Error strings for limit hits (also metric labels).
BODY_TOO_LARGE = "message body too large"
MAILBOX_FULL = "mailbox is full"
TOO_MANY_CREATED = "too many nameplates or mailboxes created by this connection"
TOO_MANY_COMMANDS = "too many commands: slow down"
# Quotas (protocol/ledger.py); the message goes on with the limit that was reached.
ADDRESS_BYTES = "quota exceeded: bytes stored from your address"
SERVER_BYTES = "quota exceeded: bytes stored on this server"
ADDRESS_NAMEPLATES = "quota exceeded: nameplates held by your address"
ADDRESS_MAILBOXES = "quota exceeded: mailboxes held by your address"
# The server's own state (its disk, its database), not the client's doing.
DISK_LOW = "server is low on disk space: only small messages are stored now"
STORAGE_DOWN = "server storage is failing: try again later"
LIMIT_ERRORS = frozenset(
    {
        BODY_TOO_LARGE,
        MAILBOX_FULL,
        TOO_MANY_CREATED,
        TOO_MANY_COMMANDS,
        ADDRESS_BYTES,
        SERVER_BYTES,
        ADDRESS_NAMEPLATES,
        ADDRESS_MAILBOXES,
        DISK_LOW,
        STORAGE_DOWN,
    }
)

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The protocol's bounds; each is also an option of `pigeonhole serve`."""

    max_body_bytes: int = setting(MiB, "Largest decoded `add` body.", min=1, unit="bytes")
    max_mailbox_messages: int = setting(300, "Messages one mailbox may hold.", min=1)
    #: decoded body bytes
    max_mailbox_bytes: int = setting(
        8 * MiB, "Body bytes one mailbox may hold.", min=1, unit="bytes"
    )
    #: allocate makes two
    max_creations: int = setting(4, "Nameplates plus mailboxes one connection may create.", min=1)
    commands_per_second: float = setting(20.0, "Sustained commands/s per connection.", min=0.1)
    command_burst: float = setting(100.0, "Commands allowed at once above the rate.", min=1)
    #: decoded body bytes, across all the address's connections (eight full mailboxes)
    max_stored_bytes_per_address: int = setting(
        64 * MiB,
        "Body bytes stored from one client address until its mailboxes are closed or pruned.",
        min=1,
        unit="bytes",
    )
    max_stored_bytes: int = setting(
        2048 * MiB, "Body bytes stored on the whole server.", min=1, unit="bytes"
    )
    #: a NAT of many users holds one or two of each per waiting transfer
    max_nameplates_per_address: int = setting(
        32, "Live nameplates created from one client address, across its connections.", min=1
    )
    max_mailboxes_per_address: int = setting(
        64, "Live mailboxes created from one client address, across its connections.", min=1
    )
    #: while the data directory is below its free-space watermark (the PAKE, version and
    #: transit messages of a real exchange are well under 4 KiB)
    low_disk_max_body_bytes: int = setting(
        16 * 1024,
        "Largest body stored while the disk is below the watermark.",
        min=0,
        unit="bytes",
    )


class TokenBucket:
    """Allows `burst` commands at once and `rate` per second sustained."""

    __slots__ = ("_burst", "_last", "_rate", "_tokens")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self._rate = rate
        self._burst = burst
        self._tokens = burst
        self._last = now

    def copy(self) -> TokenBucket:
        bucket = TokenBucket(self._rate, self._burst, self._last)
        bucket._tokens = self._tokens
        return bucket

    def take(self, now: float) -> bool:
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(self._burst, self._tokens + elapsed * self._rate)
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
