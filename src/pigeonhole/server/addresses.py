"""The client's address: the TCP peer, or what a trusted proxy says it is.

Only a peer inside the trusted-proxy networks (default: loopback) may set the address,
with X-Real-IP (and X-Real-Port) or X-Forwarded-For; the address found is the one that
limits, logs and the welcome's `your-address` use.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from aiohttp import web

from pigeonhole.clients import client_key
from pigeonhole.config import ServerConfig
from pigeonhole.server.bad_input import BadInput
from pigeonhole.server.settings import Settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(specs: Iterable[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(spec, strict=False) for spec in specs)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` names (IPv4-mapped IPv6 as IPv4), or None: a scoped IPv6 address
    (`fe80::1%eth0`) is no client's, and anything that does not parse is none."""
    text = host.strip().strip("[]")
    if "%" in text:
        return None
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _port(value: str) -> int | None:
    """A TCP port in ASCII digits (0-65535), or None (`²` and `١٢` are digits to
    `str.isdigit()` but no port; twenty digits would not fit the welcome's integer)."""
    text = value.strip()
    if not (0 < len(text) <= 5 and text.isascii() and text.isdigit()):
        return None
    port = int(text)
    return port if port <= 65535 else None


@functools.lru_cache(maxsize=4096)
def is_trusted(host: str, networks: tuple[Network, ...]) -> bool:
    """Cached: asked once per connection, mostly for the same few proxy addresses."""
    ip = _ip(host)
    return ip is not None and any(ip in net for net in networks)


def _forwarded_for(value: str, networks: tuple[Network, ...]) -> str | None:
    """The right-most address in X-Forwarded-For that is not itself a trusted proxy
    (None: a hop does not parse, or there is none)."""
    hops = [h.strip() for h in value.split(",") if h.strip()]
    for hop in reversed(hops):
        ip = _ip(hop)
        if ip is None:
            return None
        if not any(ip in net for net in networks):
            return str(ip)
    return str(_ip(hops[0])) if hops else None


class Client(NamedTuple):
    """Who a connection is: its (host, port), port None when a proxy did not say, and the
    name of a trusted proxy's header that was malformed (treated as absent), if any."""

    host: str
    port: int | None
    bad_header: str | None = None


def client_address(
    peer: tuple[str, int] | None, headers: Mapping[str, str], trusted: tuple[Network, ...]
) -> Client:
    """The client as limits, logs and the welcome see it.

    `headers` is case-insensitive (aiohttp's) or has lower-case names (the handshake's).
    A trusted proxy's header that does not parse strictly is treated as absent and named
    in `bad_header`; the next one (or the peer's own address) is used instead.
    """
    host, port = peer if peer else ("", None)
    if host[:7].lower() == "::ffff:":  # IPv4 on the dual-stack socket (server/listen.py)
        host = str(_ip(host) or host)
    if not is_trusted(host, trusted):
        return Client(host, port)
    bad: str | None = None
    real_ip = headers.get("x-real-ip")
    if real_ip is not None:
        ip = _ip(real_ip)
        if ip is not None:
            real_port = headers.get("x-real-port")
            found = _port(real_port) if real_port is not None else None
            if real_port is not None and found is None:
                bad = "x-real-port"
            return Client(str(ip), found, bad)
        bad = "x-real-ip"
    forwarded = headers.get("x-forwarded-for")
    if forwarded is not None:
        address = _forwarded_for(forwarded, trusted)
        if address is not None:
            return Client(address, None, bad)
        bad = bad or "x-forwarded-for"
    return Client(host, port, bad)


class ClientResolver:
    """Who a connection is, under the settings in force: the address after trusted
    proxies (a malformed proxy header counted as bad input), and its client key."""

    __slots__ = ("_bad", "_parsed", "_settings")

    def __init__(self, settings: Settings, bad: BadInput) -> None:
        self._settings = settings
        self._bad = bad
        #: the settings the trusted networks were parsed from, and those networks
        self._parsed: tuple[ServerConfig, tuple[Network, ...]] | None = None

    def _trusted(self) -> tuple[Network, ...]:
        """The trusted proxies' networks, parsed once per settings (a reload parses anew)."""
        config = self._settings.current
        if self._parsed is None or self._parsed[0] is not config:
            self._parsed = (config, parse_networks(config.trusted_proxies))
        return self._parsed[1]

    def client(self, transport: asyncio.BaseTransport | None, headers: Mapping[str, str]) -> Client:
        peer = transport.get_extra_info("peername") if transport else None
        found = client_address((peer[0], peer[1]) if peer else None, headers, self._trusted())
        if found.bad_header is not None:
            self._bad.note("proxy-header", found.bad_header)
        return found

    def key(self, host: str) -> str:
        """What every per-address limit, quota and rate counts (pigeonhole/clients.py)."""
        return client_key(host, self._settings.current.ipv6_prefix)

    def peer_of(self, request: web.Request) -> str:
        """Who an archive request is, for its quota and rate."""
        return self.key(self.client(request.transport, request.headers).host)
