"""Rules that say why: `deny NET REASON...` and `notice NET MESSAGE...` (`--deny-file`).

One rule a line; blank lines and lines whose first non-blank character is `#` are
skipped (a `#` inside a reason is part of it: "see #724"). NET is an IPv4 or IPv6
address or network in CIDR form. A network with host bits set (`10.1.2.3/8`) is refused,
not silently widened: it is most often a typo, and the operator should see which network
they meant (the error names it). An IPv4-mapped IPv6 network is refused too (write the
IPv4 one): clients so connected are matched as IPv4. The same NET twice for one verb is
refused: which reason would be shown could not be told from the file.

A file with any bad line is refused whole (`RuleError` names the file, the line number
and the line): a half-read file would let through what the operator meant to deny.

Matching (`RuleSet.match`) takes the address the server believes (after trusted
proxies). IPv4-mapped IPv6 is its IPv4 address; an IPv6 client is matched by its full
address, so a rule may name one address, a /64 or any prefix. A deny wins over any
notice, wherever the two are nested: a notice never lets a denied address in. Among
denies (or, when none matches, among notices) the most specific, the longest prefix,
wins, so `deny 2001:db8::/32 ...` with `deny 2001:db8:1::/48 ...` shows the /48's reason
to its clients and the /32's to the rest.

Lookups cost one dict probe per distinct prefix length present (10,000 rules of a few
lengths are a few probes), not a scan of the rules.
"""

from __future__ import annotations

import functools
import hashlib
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

Verb = Literal["deny", "notice"]
VERBS: tuple[Verb, ...] = ("deny", "notice")
#: longest reason or message kept: it goes into a welcome (a WebSocket frame) and a close
#: frame's reason (123 bytes; the relay cuts it there, server-side)
MAX_TEXT = 1000


@dataclass(frozen=True)
class Rule:
    """One rule as written: its verb, network, text and where it came from."""

    verb: Verb
    network: str
    text: str
    line: int


@dataclass(frozen=True)
class Deny(Rule):
    """The client is refused; `text` is the reason shown to it."""

    @property
    def reason(self) -> str:
        return self.text


@dataclass(frozen=True)
class Notice(Rule):
    """The client is served; `text` is the message its welcome's motd carries."""

    @property
    def message(self) -> str:
        return self.text


class RuleError(ValueError):
    """A rule file that cannot be used, with the line at fault (line 0: the whole file)."""

    def __init__(self, source: str, line: int, text: str, problem: str) -> None:
        self.source, self.line, self.text, self.problem = source, line, text, problem
        where = f"{source}:{line}" if line else source
        shown = f": {text.strip()!r}" if text.strip() else ""
        super().__init__(f"{where}: {problem}{shown}")


#: a network as numbers: (32 or 128 bits, network number, prefix length)
_Net = tuple[int, int, int]


@dataclass
class _Table:
    """The rules of one family: prefix length -> network number -> (deny, notice)."""

    bits: int
    by_length: dict[int, dict[int, tuple[Deny | None, Notice | None]]] = field(default_factory=dict)
    #: each length present, longest first, with its mask and its networks (probed in order)
    order: tuple[tuple[int, dict[int, tuple[Deny | None, Notice | None]]], ...] = ()

    def add(self, number: int, length: int, rule: Deny | Notice) -> None:
        found = self.by_length.setdefault(length, {})
        deny, notice = found.get(number, (None, None))
        if isinstance(rule, Deny):
            deny = rule
        else:
            notice = rule
        found[number] = (deny, notice)

    def seal(self) -> None:
        full = (1 << self.bits) - 1
        lengths = sorted(self.by_length, reverse=True)
        self.order = tuple((full ^ (full >> n), self.by_length[n]) for n in lengths)

    def match(self, number: int) -> Deny | Notice | None:
        """The longest deny; else the longest notice: one probe per length present."""
        notice: Notice | None = None
        for mask, networks in self.order:
            found = networks.get(number & mask)
            if found is not None:
                if found[0] is not None:
                    return found[0]
                notice = notice or found[1]
        return notice


class RuleSet:
    """Parsed rules, matched by longest prefix; an empty set matches nothing."""

    def __init__(
        self,
        rules: list[Deny | Notice] | None = None,
        source: str = "",
        networks: list[_Net] | None = None,
    ) -> None:
        """`rules` name distinct networks per verb (parse_rules sees to it); `networks`,
        when given, are theirs already parsed."""
        self.source = source
        #: a digest of the file the rules were read from ("" when not from a file)
        self.digest = ""
        self.rules: tuple[Deny | Notice, ...] = tuple(rules or ())
        self._tables = {32: _Table(32), 128: _Table(128)}
        parsed = networks or [_network(rule.network) for rule in self.rules]
        for rule, (bits, number, length) in zip(self.rules, parsed, strict=True):
            self._tables[bits].add(number, length, rule)
        for table in self._tables.values():
            table.seal()
        self.denies = sum(1 for rule in self.rules if rule.verb == "deny")
        self.notices = len(self.rules) - self.denies

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def lengths(self) -> int:
        """The most prefix lengths one lookup probes (one family's)."""
        return max(len(table.order) for table in self._tables.values())

    def match(self, address: str) -> Deny | Notice | None:
        """The rule for a client at `address` (see the module), None when none applies
        or the address does not parse (no client's, e.g. a Unix socket's empty peer)."""
        if not self.rules:
            return None
        found = _address(address)
        if found is None:
            return None
        return self._tables[found[1]].match(found[0])


#: IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as a number: the top 96 bits
_MAPPED = 0xFFFF


@functools.lru_cache(maxsize=65536)
def _address(address: str) -> tuple[int, int] | None:
    """(the address as a number, 32 or 128), IPv4-mapped IPv6 as IPv4; None: no address.
    Cached: asked once per connection, and clients come back."""
    text = address.strip().strip("[]")
    if "%" in text:  # a scoped (link-local) address is matched without its zone
        text = text.split("%", 1)[0]
    return _number(text)


def _number(text: str) -> tuple[int, int] | None:
    """`_address` of an address written plainly: inet_pton (C) rather than `ipaddress`
    (several times slower, parsing in Python)."""
    try:
        return int.from_bytes(socket.inet_pton(socket.AF_INET, text)), 32
    except (OSError, ValueError):
        pass
    try:
        number = int.from_bytes(socket.inet_pton(socket.AF_INET6, text))
    except (OSError, ValueError):
        return None
    if number >> 32 == _MAPPED:
        return number & 0xFFFFFFFF, 32
    return number, 128


def _network(text: str) -> _Net:
    """The network NET names (strict: host bits refused); ValueError says what is wrong.

    inet_pton and integers, as `_address` matches: a 10,000-rule file reads in tens of
    milliseconds (`ipaddress` takes ten times as long)."""
    address, slash, length_text = text.partition("/")
    found = _number(address)
    bits = 128 if ":" in address else 32
    if slash and not (length_text.isascii() and length_text.isdigit() and len(length_text) < 4):
        found = None
    length = int(length_text) if slash and found is not None else bits
    if found is None or length > bits:
        raise ValueError(f"{text!r} is not an IPv4 or IPv6 address or network")
    number = found[0]
    if found[1] != bits:  # ::ffff:a.b.c.d came back as IPv4
        if length >= 96:
            raise ValueError(f"{text} is IPv4-mapped: write the IPv4 network instead")
        number |= _MAPPED << 32
    host = (1 << (bits - length)) - 1
    if number & host:
        wide = _shown(bits, number & ~host, length)
        raise ValueError(f"{text} has host bits set (the network is {wide})")
    return bits, number, length


def _shown(bits: int, number: int, length: int) -> str:
    """The network's canonical text (a single address without its /32 or /128)."""
    family = socket.AF_INET if bits == 32 else socket.AF_INET6
    text = socket.inet_ntop(family, number.to_bytes(bits // 8))
    return text if length == bits else f"{text}/{length}"


def parse_rules(text: str, source: str = "<rules>") -> RuleSet:
    """The rules of a file's text; RuleError at the first bad line (nothing is kept)."""
    rules: list[Deny | Notice] = []
    networks: list[_Net] = []
    seen: dict[tuple[str, _Net], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split(None, 2)
        if not words or words[0].startswith("#"):
            continue
        verb = words[0]
        if verb not in VERBS:
            raise RuleError(source, number, line, f"unknown rule {verb!r} (use deny or notice)")
        what = "reason" if verb == "deny" else "message"
        if len(words) < 2:
            raise RuleError(source, number, line, f"{verb} needs a network and a {what}")
        try:
            net = _network(words[1])
        except ValueError as err:
            raise RuleError(source, number, line, str(err)) from None
        if len(words) < 3:
            raise RuleError(source, number, line, f"{verb} {words[1]} needs a {what}")
        said = words[2].strip()
        if len(said) > MAX_TEXT:
            raise RuleError(source, number, line, f"the {what} is over {MAX_TEXT} characters")
        if not said.isprintable():
            raise RuleError(source, number, line, f"the {what} has a control character")
        earlier = seen.setdefault((verb, net), number)
        if earlier != number:
            said_twice = f"{verb} {_shown(*net)} is already given on line {earlier}"
            raise RuleError(source, number, line, said_twice)
        kind = Deny if verb == "deny" else Notice
        rules.append(kind(verb, _shown(*net), said, number))
        networks.append(net)
    return RuleSet(rules, source, networks)


def load_rules(path: Path, unchanged: RuleSet | None = None) -> RuleSet:
    """The rules of the file at `path`; RuleError when it cannot be read or a line is bad.
    `unchanged` is returned as it is when it was read from the same bytes of the same
    file: a reload that changes only settings does not parse 10,000 rules again."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise RuleError(str(path), 0, "", f"cannot be read: {err.strerror or err}") from None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if unchanged is not None and (unchanged.source, unchanged.digest) == (str(path), digest):
        return unchanged
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise RuleError(str(path), line, "", "is not UTF-8") from None
    rules = parse_rules(text, str(path))
    rules.digest = digest
    return rules


#: a WebSocket close frame's reason holds at most this many bytes of UTF-8 (RFC 6455)
CLOSE_REASON_BYTES = 123


def close_reason(text: str) -> str:
    """`text` cut to what a close frame's reason holds, on a character boundary."""
    cut = text.encode()[:CLOSE_REASON_BYTES]
    return cut.decode("utf-8", "ignore")


#: no rules: what a server without --deny-file matches against
NO_RULES = RuleSet()


class _RuleSource(Protocol):
    @property
    def deny_file(self) -> Path | None: ...


def read_rules(config: _RuleSource, unchanged: RuleSet | None = None) -> RuleSet:
    """The rules of a config's `--deny-file` (none without one); RuleError when bad;
    `unchanged` as `load_rules` takes it."""
    return NO_RULES if config.deny_file is None else load_rules(config.deny_file, unchanged)
