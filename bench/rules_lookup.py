"""What a rule lookup costs (server/rules.py): lookups/s with 10,000 rules against none.

Rules are made from a seed: networks of the prefix lengths operators write (IPv4 /16 to
/32, IPv6 /32 to /128), half deny, half notice. The probes are client addresses as the
server sees them, each new (the per-address parse cache is cleared first, as for clients
never seen before) and then again (as for a client that reconnects), IPv4 and IPv6 mixed,
some inside a rule and most not. Rounds alternate empty and full rule sets; the best
round of each is printed with the ratio, and also the time to read a 10,000-rule file.

    .venv/bin/python bench/rules_lookup.py [--rules 10000] [--probes 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import time

from pigeonhole.server.rules import NO_RULES, RuleSet, parse_rules
from pigeonhole.server.rules import _address as parsed_address

V4_LENGTHS = (16, 20, 24, 28, 32)
V6_LENGTHS = (32, 48, 56, 64, 128)


def rule_file(count: int, chance: random.Random) -> str:
    lines: list[str] = []
    seen: set[str] = set()
    while len(lines) < count:
        v6 = chance.random() < 0.5
        bits = 128 if v6 else 32
        length = chance.choice(V6_LENGTHS if v6 else V4_LENGTHS)
        number = chance.getrandbits(bits) >> (bits - length) << (bits - length)
        net = str(ipaddress.ip_network((number, length)))
        if net in seen or (v6 and ipaddress.IPv6Network(net).network_address.ipv4_mapped):
            continue
        seen.add(net)
        verb = "deny" if len(lines) % 2 else "notice"
        lines.append(f"{verb} {net} reason number {len(lines)}")
    return "\n".join(lines) + "\n"


def probes(count: int, chance: random.Random) -> list[str]:
    found: list[str] = []
    for i in range(count):
        if i % 2:
            found.append(str(ipaddress.IPv6Address(chance.getrandbits(128))))
        else:
            found.append(str(ipaddress.IPv4Address(chance.getrandbits(32))))
    return found


def rate(rules: RuleSet, addresses: list[str], fresh: bool) -> tuple[float, int]:
    """Lookups/s over `addresses`, and how many matched."""
    if fresh:
        parsed_address.cache_clear()
    match = rules.match
    hits = 0
    start = time.perf_counter()
    for address in addresses:
        if match(address) is not None:
            hits += 1
    return len(addresses) / (time.perf_counter() - start), hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=10_000)
    parser.add_argument("--probes", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    chance = random.Random(36)
    text = rule_file(args.rules, chance)
    start = time.perf_counter()
    full = parse_rules(text, "bench")
    read = time.perf_counter() - start
    addresses = probes(args.probes, chance)
    # a tenth of the probes inside a rule: its network's first address
    for i, rule in enumerate(full.rules[: args.probes // 10]):
        addresses[i * 10] = str(ipaddress.ip_network(rule.network)[0])
    print(
        f"{len(full)} rules read in {read * 1000:.0f} ms;"
        f" prefix lengths probed per lookup: at most {full.lengths}"
    )
    best: dict[tuple[str, bool], float] = {}
    matched: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, rules in (("none", NO_RULES), (f"{len(full)}", full)):
            for fresh in (True, False):
                per_second, hits = rate(rules, addresses, fresh)
                key = (name, fresh)
                best[key] = max(best.get(key, 0.0), per_second)
                matched[name] = hits
    for fresh in (True, False):
        kind = "new addresses" if fresh else "seen addresses"
        none, many = best[("none", fresh)], best[(f"{len(full)}", fresh)]
        print(
            f"{kind:15}: no rules {none / 1e6:6.2f} M lookups/s,"
            f" {len(full)} rules {many / 1e6:6.2f} M lookups/s"
            f" ({many / none:.2f}x; {1e6 / many:.2f} us each)"
        )
    print(f"matched: {matched} of {len(addresses)} probes")


if __name__ == "__main__":
    main()
