"""Rule files (server/rules.py): what parses, what is refused and why, and what matches."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import pytest

from pigeonhole.server.rules import NO_RULES, Deny, Notice, RuleError, load_rules, parse_rules

RULES = """\
# abusers, by network
deny 10.0.0.0/8 this network sent too much: see https://example.org/#724

deny 10.9.0.0/16   a narrower reason
notice 10.1.0.0/16 a notice inside a denied network: never served
notice 192.0.2.7 please slow down
   # an indented comment
deny 2001:db8::/32 IPv6 block
notice 2001:db8:ffff::/48 a notice that a deny covers
deny 2001:db8:1:2::/64 one IPv6 /64
notice 2001:db9::/32 IPv6 notice
deny 2001:db9::1 one IPv6 address
"""


def test_rules_are_read_with_their_lines_and_texts() -> None:
    rules = parse_rules(RULES, "deny.txt")
    assert (len(rules), rules.denies, rules.notices) == (9, 5, 4)
    first = rules.rules[0]
    assert isinstance(first, Deny)
    assert (first.network, first.line) == ("10.0.0.0/8", 2)
    assert first.reason == "this network sent too much: see https://example.org/#724"
    assert rules.rules[1].text == "a narrower reason"  # spaces before the text dropped
    assert rules.rules[3].network == "192.0.2.7"  # a single address is shown as one


@pytest.mark.parametrize(
    ("address", "verb", "line"),
    [
        ("10.200.3.4", "deny", 2),
        ("10.9.0.1", "deny", 4),  # the longest prefix gives its reason
        ("10.1.2.3", "deny", 2),  # a deny wins over a more specific notice
        ("::ffff:10.9.8.7", "deny", 4),  # IPv4-mapped IPv6 is its IPv4 address
        ("192.0.2.7", "notice", 6),
        ("192.0.2.8", None, None),
        ("2001:db8:77::1", "deny", 8),
        ("2001:db8:ffff::1", "deny", 8),
        ("2001:db8:1:2:aaaa::9", "deny", 10),
        ("[2001:db8:1:3::9]", "deny", 8),
        ("2001:db9::1", "deny", 12),  # one address, within a noticed /32
        ("2001:db9::2", "notice", 11),
        ("fe80::1%eth0", None, None),
        ("2001:dba::1", None, None),
        ("", None, None),
        ("not an address", None, None),
    ],
)
def test_the_deny_or_else_the_longest_prefix_wins(
    address: str, verb: str | None, line: int | None
) -> None:
    found = parse_rules(RULES, "deny.txt").match(address)
    assert (found and found.verb, found and found.line) == (verb, line)
    if verb == "deny":
        assert isinstance(found, Deny)
    elif verb == "notice":
        assert isinstance(found, Notice)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("deny 10.0.0.1/8 typo", "10.0.0.1/8 has host bits set (the network is 10.0.0.0/8)"),
        ("deny 2001:db8::1/64 typo", "has host bits set (the network is 2001:db8::/64)"),
        ("deny 10.0.0.0/8", "deny 10.0.0.0/8 needs a reason"),
        ("notice 10.0.0.0/8   ", "notice 10.0.0.0/8 needs a message"),
        ("deny", "deny needs a network and a reason"),
        ("allow 10.0.0.0/8 why", "unknown rule 'allow' (use deny or notice)"),
        ("DENY 10.0.0.0/8 why", "unknown rule 'DENY'"),
        ("deny 10.0.0.0/33 why", "'10.0.0.0/33' is not an IPv4 or IPv6 address or network"),
        ("deny example.org why", "'example.org' is not an IPv4 or IPv6 address"),
        ("deny ::ffff:10.0.0.1 why", "IPv4-mapped: write the IPv4 network instead"),
        ("deny 10.0.0.0/8 " + "x" * 1001, "the reason is over 1000 characters"),
        ("notice 10.0.0.0/8 a\x07bell", "the message has a control character"),
    ],
)
def test_a_bad_line_refuses_the_file_naming_file_line_and_text(line: str, problem: str) -> None:
    text = f"# fine\ndeny 192.0.2.0/24 fine\n{line}\nnotice 192.0.2.9 never read\n"
    with pytest.raises(RuleError) as refused:
        parse_rules(text, "/etc/pigeonhole/deny.txt")
    message = str(refused.value)
    assert message.startswith("/etc/pigeonhole/deny.txt:3: ")
    assert problem in message
    assert repr(line.strip()) in message
    assert (refused.value.line, refused.value.source) == (3, "/etc/pigeonhole/deny.txt")


def test_the_same_network_twice_for_one_verb_is_refused_and_both_verbs_are_kept() -> None:
    with pytest.raises(RuleError, match=r"f:3: deny 10.0.0.0/8 is already given on line 1"):
        parse_rules("deny 10.0.0.0/8 one\nnotice 10.0.0.0/8 a notice\ndeny 10.0.0.0/8 two\n", "f")
    both = parse_rules("deny 10.0.0.0/8 one\nnotice 10.0.0.0/8 a notice\n", "f")
    assert isinstance(both.match("10.1.1.1"), Deny)


def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match=r"missing\.txt: cannot be read: No such file"):
        load_rules(tmp_path / "missing.txt")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"deny 10.0.0.0/8 fine\ndeny 10.1.0.0/16 caf\xe9\n")
    with pytest.raises(RuleError, match=r"latin.txt:2: is not UTF-8"):
        load_rules(latin)
    good = tmp_path / "good.txt"
    good.write_text(RULES)
    assert load_rules(good).source == str(good) and len(load_rules(good)) == 9
    good.write_text("")
    assert len(load_rules(good)) == 0 and load_rules(good).match("10.0.0.1") is None


def test_no_rules_match_nothing() -> None:
    assert NO_RULES.match("10.0.0.1") is None and len(NO_RULES) == 0


Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _brute_force(rules: list[tuple[str, Net]], address: str) -> tuple[str, Net] | None:
    """The rule the module documents, found by scanning every rule."""
    ip = ipaddress.ip_address(address)
    for verb in ("deny", "notice"):
        inside = [net for kind, net in rules if kind == verb and ip in net]
        if inside:
            return verb, max(inside, key=lambda net: net.prefixlen)
    return None


def test_ten_thousand_rules_agree_with_a_scan_of_them() -> None:
    """Seeded: random networks of many lengths, both families; addresses inside and out."""
    chance = random.Random(36)
    written: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    while len(written) < 10_000:
        v6 = chance.random() < 0.5
        bits = 128 if v6 else 32
        length = chance.choice([8, 12, 16, 24, 32] if not v6 else [32, 48, 56, 64, 96, 128])
        number = chance.getrandbits(bits) & (((1 << bits) - 1) ^ ((1 << (bits - length)) - 1))
        # keep them in a few narrow ranges, so nesting is common
        number = (number & ((1 << (bits - 6)) - 1)) | (0b001000 << (bits - 6))
        net = str(ipaddress.ip_network((number, length)))
        if v6 and ipaddress.ip_network(net).network_address.ipv4_mapped is not None:
            continue
        entry = (chance.choice(["deny", "notice"]), net)
        if entry not in seen:
            seen.add(entry)
            written.append(entry)
    text = "\n".join(f"{verb} {net} rule {i}" for i, (verb, net) in enumerate(written))
    rules = parse_rules(text, "many")
    assert len(rules) == 10_000
    probes = [str(ipaddress.ip_network(net)[0]) for _, net in written[:200]]
    probes += [
        str(ipaddress.ip_address((0b001000 << 26) | chance.getrandbits(26))) for _ in range(200)
    ]
    probes += [
        str(ipaddress.ip_address((0b001000 << 122) | chance.getrandbits(122))) for _ in range(200)
    ]
    networks = [(verb, ipaddress.ip_network(net)) for verb, net in written]
    hits = 0
    for address in probes:
        found = rules.match(address)
        got = (found.verb, ipaddress.ip_network(found.network)) if found else None
        assert got == _brute_force(networks, address), address
        hits += got is not None
    assert 200 <= hits < len(probes)  # both matches and misses were tried


def test_a_file_read_again_unchanged_is_not_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "deny.txt"
    path.write_text(RULES)
    first = load_rules(path)
    assert load_rules(path, first) is first
    path.write_text(RULES + "deny 192.0.2.99 one more\n")
    second = load_rules(path, first)
    assert second is not first and len(second) == len(first) + 1
    other = tmp_path / "other.txt"
    other.write_text(RULES + "deny 192.0.2.99 one more\n")
    assert load_rules(other, second) is not second  # another file, the same bytes
