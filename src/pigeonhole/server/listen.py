"""The public listening socket: `::` means every IPv4 and IPv6 address, as in the reference;
and its TLS context when the server serves `wss://` itself (`--tls-cert`, `--tls-key`).

asyncio binds an IPv6 address with IPV6_V6ONLY set, so `--host ::` would leave IPv4
clients out, while the reference's default endpoint (`tcp:4000:interface=\\:\\:`)
answers both. An operator switching on the same port and host gets the same: one
dual-stack socket.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

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


def tls_context(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """The server side of TLS with this certificate chain and key (None: plain TCP)."""
    if cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
