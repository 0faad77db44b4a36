"""The network: mailbox WebSockets on raw asyncio (websockets' sans-I/O protocol), aiohttp
for every other route, around the protocol core and the store."""

from __future__ import annotations

from pigeonhole.server.app import MailboxServer

__all__ = ["MailboxServer"]
