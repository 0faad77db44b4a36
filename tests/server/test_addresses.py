"""Trusted-proxy headers parsed strictly: a bad value is absent, named, and the next one used."""

from __future__ import annotations

import pytest

from pigeonhole.server.addresses import Client, client_address, parse_networks

LOOPBACK = parse_networks(["127.0.0.0/8", "::1/128"])
PROXY = ("127.0.0.1", 5555)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-real-ip": "198.51.100.7", "x-real-port": "4242"}, Client("198.51.100.7", 4242)),
        ({"x-real-ip": "198.51.100.7"}, Client("198.51.100.7", None)),
        ({"x-real-ip": "198.51.100.7", "x-real-port": "0"}, Client("198.51.100.7", 0)),
        ({"x-real-ip": "198.51.100.7", "x-real-port": "65535"}, Client("198.51.100.7", 65535)),
        *(
            (
                {"x-real-ip": "198.51.100.7", "x-real-port": port},
                Client("198.51.100.7", None, "x-real-port"),
            )
            for port in [
                "\u00b2",
                "\u0661\u0662",
                "65536",
                "-1",
                "1e3",
                "",
                "123456789012345678901234",
            ]
        ),
        ({"x-real-ip": "999.1.1.1"}, Client("127.0.0.1", 5555, "x-real-ip")),
        ({"x-real-ip": "fe80::1%eth0"}, Client("127.0.0.1", 5555, "x-real-ip")),
        # a bad X-Real-IP is absent: X-Forwarded-For is used, and the bad header still named
        (
            {"x-real-ip": "garbage", "x-forwarded-for": "203.0.113.5"},
            Client("203.0.113.5", None, "x-real-ip"),
        ),
        ({"x-forwarded-for": "203.0.113.5, 127.0.0.1"}, Client("203.0.113.5", None)),
        ({"x-forwarded-for": "203.0.113.5, junk"}, Client("127.0.0.1", 5555, "x-forwarded-for")),
        ({"x-real-ip": "::ffff:192.0.2.7"}, Client("192.0.2.7", None)),
    ],
)
def test_trusted_proxy_headers(headers: dict[str, str], expected: Client) -> None:
    assert client_address(PROXY, headers, LOOPBACK) == expected


def test_untrusted_peer_headers_are_ignored_not_counted() -> None:
    headers = {"x-real-ip": "garbage", "x-real-port": "\u00b2"}
    assert client_address(("192.0.2.1", 1), headers, LOOPBACK) == Client("192.0.2.1", 1)
