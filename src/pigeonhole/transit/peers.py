"""Pairs across relays: a connection waiting on another relay is reached through it.

Several relays (one per `pigeonhole serve` node) can share one pairing directory: a
connection that finds no partner here asks the directory, in one atomic step, either for
a waiter of its token (a compatible side) on another relay, or to be recorded as waiting
here. Found: this relay connects to that relay's address as a client, sends the
handshake line on the client's behalf, and joins the two connections like a pair (bytes
spliced in the kernel), so the pair meets on the relay where the first side waits and
`ok` comes from there. The later arrival always forwards to the earlier one.

Each recorded waiter carries a random ticket, and the forwarding relay adds it to the
line (` link TICKET`): the waiting relay then knows the connection for a link, not a
client, and charges it to no address (else every pair forwarded from one node would
count against that node's address). Only a reader of the directory knows a ticket.

The directory is an interface: the relay knows nothing of where it is kept (the server
keeps it in PostgreSQL: pigeonhole/server/transit.py).
"""

from __future__ import annotations

import secrets
import typing

#: (host, port) of another relay, as its directory row gives it
Address = tuple[str, int]


class Found(typing.NamedTuple):
    """A waiter on another relay: where, and its ticket (None: recorded without one)."""

    address: Address
    ticket: str | None


def new_ticket() -> str:
    """A waiter's ticket: 128 random bits, as hex."""
    return secrets.token_hex(16)


class Directory(typing.Protocol):
    """Where the relays sharing pairs record their waiting connections."""

    async def meet(self, token: str, side: str | None, ticket: str) -> Found | None:
        """A compatible waiter's relay elsewhere and its ticket, or None after recording
        one waiter here with `ticket`."""

    async def left(self, token: str, side: str | None) -> None:
        """One waiter recorded here has paired or gone: its record is removed."""

    async def gone(self, address: Address) -> None:
        """The relay at `address` did not answer: its records are stale, removed."""


def handshake_line(token: str, side: str | None, ticket: str | None = None) -> bytes:
    """The line the client sent, as the other relay must read it, with the waiter's
    ticket when its row has one."""
    line = f"please relay {token}" if side is None else f"please relay {token} for side {side}"
    if ticket is not None:
        line += f" link {ticket}"
    return f"{line}\n".encode("ascii")


def format_address(address: Address) -> str:
    """(host, port) as `HOST:PORT` (an IPv6 host in brackets), as `parse_address` reads it."""
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(text: str) -> Address:
    """`HOST:PORT` (an IPv6 host in brackets) as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]"), int(port)
