"""What counts as one client: the one rule every per-address limit, quota and rate uses.

An IPv4 client is its address. An IPv6 host is handed a whole /64 (often a /56 or /48)
and may pick a new source address per connection, so counting IPv6 clients by their full
address would multiply every per-address bound by up to 2^64. An IPv6 client is therefore
its prefix (`/64` by default, `--ipv6-prefix`), as rate limiters operators trust (nginx
keyed on a prefix, fail2ban, Cloudflare) count it. IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is
the IPv4 address. The welcome's `your-address` and nothing else keeps the real address.

A key is also accepted as input (`2001:db8::/64` -> itself, or its wider prefix), so owners
stored by the channel database are regrouped when they are loaded after a restart, even
if they were stored as full addresses or under another prefix.
"""

from __future__ import annotations

import functools
import ipaddress

#: the IPv6 prefix length that is one client unless the operator says otherwise
DEFAULT_IPV6_PREFIX = 64


@functools.lru_cache(maxsize=65536)
def client_key(host: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """The key every per-client bound counts `host` under (anything unparsable: itself)."""
    text = host.strip().strip("[]")
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return host
    if isinstance(net, ipaddress.IPv4Network):
        return str(net.network_address) if net.prefixlen == 32 else str(net)
    mapped = net.network_address.ipv4_mapped
    if mapped is not None and net.prefixlen == 128:
        return str(mapped)
    if net.prefixlen > ipv6_prefix:
        net = net.supernet(new_prefix=ipv6_prefix)
    if net.prefixlen == 128:
        return str(net.network_address)
    return str(net)
