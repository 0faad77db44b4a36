"""The `welcome` message's body (the server protocol's `welcome`, as the reference sends it)."""

from __future__ import annotations

import ipaddress


def your_address(host: str, port: int | None) -> dict[str, object]:
    """`{"ipv4"|"ipv6": host, "port": port}`; IPv4-mapped IPv6 is shown as IPv4.

    A port we do not know (a proxy that sent X-Real-IP without X-Real-Port) is left out
    rather than failing the handshake as the reference does.
    """
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip is None:
        family = "ipv6" if ":" in host else "ipv4"
        text = host
    else:
        family = "ipv4" if ip.version == 4 else "ipv6"
        text = str(ip)
    address: dict[str, object] = {family: text}
    if port is not None:
        address["port"] = port
    return address


def welcome_body(
    *,
    motd: str | None,
    signal_error: str | None,
    advertise_version: str | None,
    address: dict[str, object],
    extra: dict[str, object] | None = None,
) -> dict[str, object]:
    body: dict[str, object] = {}
    if motd is not None:
        body["motd"] = motd
    if advertise_version is not None:
        body["current_cli_version"] = advertise_version
    if signal_error is not None:
        body["error"] = signal_error
    body["your-address"] = address
    if extra:
        body.update(extra)
    return body
