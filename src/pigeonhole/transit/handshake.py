"""The relay handshake line, as bytes in: `please relay TOKEN [for side SIDE]\\n`.

A relay forwarding a side to another relay (peers.py) may add ` link TICKET`: the ticket
the other relay gave its waiter, so that relay knows the connection for a link and not
a client (its per-address bounds are for clients).

As the reference (a Twisted LineReceiver, `\\n` only, 1024 bytes at most), bytes after
the line are payload; unlike the reference's WebSocket side, a line split over several
reads or messages is put together before it is judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: a longer line (or that much without a newline) is closed without a reply
MAX_LINE_BYTES = 1024

# the reference's regexes; `\w` on bytes is [A-Za-z0-9_]
_NEW = re.compile(rb"please relay (\w{64}) for side (\w{16})")
_OLD = re.compile(rb"please relay (\w{64})")
#: a link from another relay: either form, then the waiter's ticket
_LINK = re.compile(rb"(please relay \w{64}(?: for side \w{16})?) link ([0-9a-f]{32})")


@dataclass(frozen=True, slots=True)
class Request:
    """A good handshake: the token, the side (None in the old form), what followed it."""

    token: str
    side: str | None
    rest: bytes
    #: the ticket a forwarding relay sent (peers.py); None from a client
    ticket: str | None = None


@dataclass(frozen=True, slots=True)
class Bad:
    """A line that is no handshake (`bad handshake`), or too long (closed silently)."""

    too_long: bool


def parse_line(line: bytes) -> tuple[str, str | None] | None:
    """(token, side) of one line without its newline, or None if it matches neither form."""
    new = _NEW.fullmatch(line)
    if new is not None:
        return new.group(1).decode("ascii"), new.group(2).decode("ascii")
    old = _OLD.fullmatch(line)
    if old is not None:
        return old.group(1).decode("ascii"), None
    return None


class LineBuffer:
    """Gathers the first line over any number of reads."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def pending(self) -> int:
        """Bytes received that are not yet a whole line."""
        return len(self._buffer)

    def feed(self, data: bytes) -> Request | Bad | None:
        """The verdict once the line is complete or too long; None while it is not."""
        buffer = self._buffer + data if self._buffer else data
        end = buffer.find(b"\n")
        if end < 0:
            if len(buffer) > MAX_LINE_BYTES:
                self._buffer = b""
                return Bad(too_long=True)
            self._buffer = buffer
            return None
        self._buffer = b""
        line = buffer[:end]
        if len(line) > MAX_LINE_BYTES:
            return Bad(too_long=True)
        ticket = None
        link = _LINK.fullmatch(line)
        if link is not None:
            line, ticket = link.group(1), link.group(2).decode("ascii")
        parsed = parse_line(line)
        if parsed is None:
            return Bad(too_long=False)
        return Request(parsed[0], parsed[1], buffer[end + 1 :], ticket)
