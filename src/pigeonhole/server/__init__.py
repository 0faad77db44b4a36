"""The only layer that does network I/O: aiohttp WebSockets around the protocol core."""

from __future__ import annotations

from pigeonhole.server.app import MailboxServer

__all__ = ["MailboxServer"]
