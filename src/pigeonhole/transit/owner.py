"""What a connection reports to the relay (hub.py's `Hub` is the one implementation)."""

from __future__ import annotations

import typing

from pigeonhole.transit.party import Party


class Owner(typing.Protocol):
    """Events of one connection, named by its party in the core."""

    def data(self, party: Party, data: bytes) -> None:
        """Bytes from the client."""

    def pieces(self, party: Party, pieces: list[bytes]) -> None:
        """Several pieces of the client's stream at once, in order (one WebSocket read
        of several frames): a partner gets them in one write."""

    def eof(self, party: Party) -> None:
        """The client ended its side (EOF, reset, a WebSocket close)."""

    def refused(self, party: Party, kind: str) -> None:
        """The client broke a rule the I/O layer checks (a text frame): counted."""

    def drained(self, party: Party) -> None:
        """What was queued for the client has (mostly) gone: its partner may send again."""

    def gone(self, party: Party) -> None:
        """The connection is closed for good."""
