"""Per-connection and per-mailbox limits the protocol enforces (pure; time passed in).

Defaults leave real clients untouched (a 100 KB `wormhole send --text` is one ~200 KB
hex body) while bounding what one abusive connection can store or cost.
"""

from __future__ import annotations

from dataclasses import dataclass

# Error strings for limit hits (also metric labels).
BODY_TOO_LARGE = "message body too large"
MAILBOX_FULL = "mailbox is full"
TOO_MANY_CREATED = "too many nameplates or mailboxes created by this connection"
TOO_MANY_COMMANDS = "too many commands: slow down"
LIMIT_ERRORS = frozenset({BODY_TOO_LARGE, MAILBOX_FULL, TOO_MANY_CREATED, TOO_MANY_COMMANDS})


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


class TokenBucket:
    """Allows `burst` commands at once and `rate` per second sustained."""

    __slots__ = ("_burst", "_last", "_rate", "_tokens")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self._rate = rate
        self._burst = burst
        self._tokens = burst
        self._last = now

    def take(self, now: float) -> bool:
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(self._burst, self._tokens + elapsed * self._rate)
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
