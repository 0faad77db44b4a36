"""The public listening socket: `::` means every IPv4 and IPv6 address, as in the reference.

asyncio binds an IPv6 address with IPV6_V6ONLY set, so `--host ::` would leave IPv4
clients out, while the reference's default endpoint (`tcp:4000:interface=\\:\\:`)
answers both. An operator switching on the same port and host gets the same: one
dual-stack socket.
"""

from __future__ import annotations

import socket

ALL_ADDRESSES = "::"


def dual_stack_socket(port: int) -> socket.socket:
    """A socket bound to [::]:port that also takes IPv4 (as ::ffff:a.b.c.d)."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::", port))
    except OSError:
        sock.close()
        raise
    return sock
