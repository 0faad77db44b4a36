"""The client's address: the TCP peer, or what a trusted proxy says it is.

Only a peer inside the trusted-proxy networks (default: loopback) may set the address,
with X-Real-IP (and X-Real-Port) or X-Forwarded-For; the address found is the one that
limits, logs and the welcome's `your-address` use.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(specs: Iterable[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(spec, strict=False) for spec in specs)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@functools.lru_cache(maxsize=4096)
def is_trusted(host: str, networks: tuple[Network, ...]) -> bool:
    """Cached: asked once per connection, mostly for the same few proxy addresses."""
    ip = _ip(host)
    return ip is not None and any(ip in net for net in networks)


def _forwarded_for(value: str, networks: tuple[Network, ...]) -> str | None:
    """The right-most address in X-Forwarded-For that is not itself a trusted proxy."""
    hops = [h.strip() for h in value.split(",") if h.strip()]
    for hop in reversed(hops):
        ip = _ip(hop)
        if ip is None:
            return None
        if not any(ip in net for net in networks):
            return str(ip)
    return str(_ip(hops[0])) if hops else None


def client_address(
    peer: tuple[str, int] | None, headers: Mapping[str, str], trusted: tuple[Network, ...]
) -> tuple[str, int | None]:
    """(host, port) of the client; port None when a proxy did not say.

    `headers` is case-insensitive (aiohttp's) or has lower-case names (the handshake's).
    """
    host, port = peer if peer else ("", None)
    if host[:7].lower() == "::ffff:":  # IPv4 on the dual-stack socket (server/listen.py)
        host = str(_ip(host) or host)
    if not is_trusted(host, trusted):
        return host, port
    real_ip = headers.get("x-real-ip")
    if real_ip and _ip(real_ip) is not None:
        real_port = headers.get("x-real-port", "").strip()
        return str(_ip(real_ip)), int(real_port) if real_port.isdigit() else None
    forwarded = headers.get("x-forwarded-for")
    if forwarded:
        found = _forwarded_for(forwarded, trusted)
        if found is not None:
            return found, None
    return host, port
