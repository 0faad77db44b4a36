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
    #: largest decoded `add` body, in bytes
    max_body_bytes: int = 1024 * 1024
    #: messages one mailbox may hold
    max_mailbox_messages: int = 300
    #: decoded body bytes one mailbox may hold
    max_mailbox_bytes: int = 8 * 1024 * 1024
    #: nameplates plus mailboxes one connection may create (allocate makes two)
    max_creations: int = 4
    #: sustained commands per second per connection, and the burst allowed above it
    commands_per_second: float = 20.0
    command_burst: float = 100.0
    #: decoded body bytes stored from one client address, across all its connections,
    #: until its mailboxes are closed or pruned (eight full mailboxes)
    max_stored_bytes_per_address: int = 64 * MiB
    #: decoded body bytes stored on the whole server
    max_stored_bytes: int = 2048 * MiB
    #: live nameplates and mailboxes one client address created (a NAT of many users
    #: holds one or two of each per waiting transfer)
    max_nameplates_per_address: int = 32
    max_mailboxes_per_address: int = 64
    #: largest body stored while the data directory is below its free-space watermark
    #: (the PAKE, version and transit messages of a real exchange are well under 4 KiB)
    low_disk_max_body_bytes: int = 16 * 1024


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
