"""The relay's pairing core, sans-I/O: connections in, decisions out, the clock passed in.

The same core serves TCP and WebSocket connections (one pairing table), and decides what
the reference relay decides (handshake forms, same side never pairs, redundant waiters
closed on a match, `ok`, `bad handshake`, `impatient`, one usage record per connection or
pair) plus the bounds of `TransitConfig`. The I/O layer (relay.py, websocket.py) reports
what happened on a connection and carries out the returned `Step`: lines to send, which
connections to close, which pair to join.
"""

from __future__ import annotations

from collections import Counter

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.endpoint import Endpoint
from pigeonhole.transit.handshake import Bad, Request
from pigeonhole.transit.limits import AddressBook, Refusal, Refusals, TokenBucket
from pigeonhole.transit.party import Party, Phase, Step
from pigeonhole.transit.usage import Mood, UsageSink, make_record

OK = b"ok\n"
#: the address key of connections this relay makes to other relays (peers.py)
PEER_ADDRESS = "relay-peer"
BAD_HANDSHAKE = b"bad handshake\n"
IMPATIENT = b"impatient\n"


class TransitCore:
    """The pairing table, the bounds and the usage records of one relay."""

    def __init__(self, config: TransitConfig, usage: UsageSink, now: float) -> None:
        self.config = config
        self._usage = usage
        self._waiting: dict[str, list[Party]] = {}
        #: connections not yet paired (handshake or waiting), for the timeouts
        self._unpaired: set[Party] = set()
        #: one party (the first to connect) per active pair
        self._pairs: set[Party] = set()
        self.addresses = AddressBook()
        self.refusals = Refusals(config.log_summary_interval, now)
        self.moods: Counter[str] = Counter()
        self.connections = 0
        self.bytes_relayed = 0
        self.draining = False

    # -- figures -------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        return sum(len(parties) for parties in self._waiting.values())

    @property
    def active_pairs(self) -> int:
        return len(self._pairs)

    # -- connections come and go ---------------------------------------------------

    def open(self, address: str, endpoint: Endpoint, now: float) -> Party | str:
        """A new connection's party, or the refusal kind (the caller closes it)."""
        kind = None
        if self.draining:
            kind = Refusal.DRAINING
        elif self.connections >= self.config.max_connections:
            kind = Refusal.CONNECTIONS
        elif self.addresses.connections[address] >= self.config.max_connections_per_address:
            kind = Refusal.CONNECTIONS_PER_ADDRESS
        if kind is not None:
            self.refusals.note(kind, now)
            return kind
        self.connections += 1
        self.addresses.opened(address)
        party = Party(address, endpoint, now)
        self._unpaired.add(party)
        return party

    def forget(self, party: Party, now: float) -> Step:
        """The connection is gone (closed by either end): its slot is free again."""
        step = self.lost(party, now)
        self.connections -= 1
        self.addresses.closed(party.address)
        return step

    def lost(self, party: Party, now: float) -> Step:
        """The client ended (EOF, error): its record, and its partner's close."""
        if party.phase is Phase.PAIRED:
            return self.end_pair(party, now)
        if party.phase is Phase.DONE:
            return Step()
        if party.phase is Phase.WAITING:
            party.mood = Mood.LONELY
        self._finish(party, now)
        return Step(closes=[(party, b"")])

    # -- bytes from a client -------------------------------------------------------

    def receive(self, party: Party, data: bytes, now: float) -> Step:
        """Bytes from a client that is not yet paired (the handshake, or impatience)."""
        if party.phase is Phase.HANDSHAKE:
            assert party.line is not None
            verdict = party.line.feed(data)
            if verdict is None:
                return Step()
            if isinstance(verdict, Bad):
                return self._bad(party, verdict, now)
            return self._arrive(party, verdict, now)
        if party.phase is Phase.WAITING:
            return self._refuse(party, Mood.IMPATIENT, Refusal.IMPATIENT, IMPATIENT, now)
        return Step()

    def relayed(self, party: Party, size: int, now: float) -> Step | None:
        """`size` bytes from `party` went to its partner; a Step if a cap ends the pair."""
        party.sent += size
        party.last_active = now
        self.bytes_relayed += size
        config = self.config
        partner = party.partner
        if partner is None:
            return None
        cap = config.max_bytes_per_transfer
        if cap is not None and party.sent + partner.sent > cap:
            self.refusals.note(Refusal.BYTES_PER_TRANSFER, now)
            return self.end_pair(party, now)
        daily = config.max_bytes_per_address_per_day
        if daily is not None:
            over = False  # each client address once; a link to another relay is none
            for address in dict.fromkeys((party.address, partner.address)):
                if address != PEER_ADDRESS:
                    over = self.addresses.charge(address, size, now) > daily or over
            if over:
                self.refusals.note(Refusal.BYTES_PER_ADDRESS_PER_DAY, now)
                return self.end_pair(party, now)
        return None

    # -- handshake and pairing -----------------------------------------------------

    def _bad(self, party: Party, verdict: Bad, now: float) -> Step:
        if verdict.too_long:  # the reference drops it silently; its record says `empty`
            return self._refuse(party, Mood.EMPTY, Refusal.LINE_TOO_LONG, b"", now)
        return self._refuse(party, Mood.ERRORY, Refusal.BAD_HANDSHAKE, BAD_HANDSHAKE, now)

    def _arrive(self, party: Party, request: Request, now: float) -> Step:
        party.line = None
        party.token, party.side = request.token, request.side
        party.waiting_since = now
        waiters = self._waiting.get(request.token, [])
        if request.ticket is not None and any(w.ticket == request.ticket for w in waiters):
            self._as_link(party)
        for waiter in waiters:
            if waiter.side is None or request.side is None or waiter.side != request.side:
                return self._pair(waiter, party, request.rest, now)
        party.phase = Phase.WAITING
        party.mood = Mood.LONELY
        self._waiting.setdefault(request.token, []).append(party)
        if request.rest:
            return self._refuse(party, Mood.IMPATIENT, Refusal.IMPATIENT, IMPATIENT, now)
        return Step()

    def _pair(self, waiter: Party, newcomer: Party, rest: bytes, now: float) -> Step:
        assert newcomer.token is not None
        others = [p for p in self._waiting.pop(newcomer.token) if p is not waiter]
        step = Step(paired=newcomer, payload=rest)
        for other in others:  # every other waiter of the token: it will never pair
            other.mood = Mood.REDUNDANT
            self._finish(other, now)
            step.closes.append((other, b""))
        self._link(waiter, newcomer, now)
        if rest:
            newcomer.sent += len(rest)
            self.bytes_relayed += len(rest)
        return step

    def _as_link(self, party: Party) -> None:
        """A relay forwarding a side here (its ticket is our waiter's): no client's."""
        self.addresses.closed(party.address)
        party.address = PEER_ADDRESS
        self.addresses.opened(PEER_ADDRESS)

    def forward(self, party: Party, link: Endpoint, now: float) -> tuple[Step, Party]:
        """Join waiting `party` to `link`, a connection to the relay where its partner
        waits (the handshake already sent on it): that relay says `ok`, keeps the record."""
        self._unwait(party)
        self.connections += 1
        self.addresses.opened(PEER_ADDRESS)
        peer = Party(PEER_ADDRESS, link, now)
        peer.line, peer.peer = None, True
        peer.token, peer.side = party.token, party.side
        self._link(party, peer, now)
        return Step(paired=peer, greet=False), peer

    def _link(self, waiter: Party, newcomer: Party, now: float) -> None:
        for party, partner in ((waiter, newcomer), (newcomer, waiter)):
            self._unpaired.discard(party)
            party.phase = Phase.PAIRED
            party.mood = Mood.HAPPY
            party.partner = partner
            party.last_active = now
            rate = self.config.max_rate_bytes_per_second
            if rate is not None:
                party.bucket = TokenBucket(rate, now)
        waiter.first = True
        self._pairs.add(waiter)

    def end_pair(self, party: Party, now: float) -> Step:
        """Close both sides of `party`'s pair (each after what is queued for it)."""
        partner = party.partner
        if party.phase is not Phase.PAIRED or partner is None:
            return Step()
        first, second = (party, partner) if party.first else (partner, party)
        self._pairs.discard(first)
        first.phase = second.phase = Phase.DONE
        if first.peer or second.peer:  # the relay the pair met on keeps its record
            return Step(closes=[(party, b""), (partner, b"")])
        record = make_record(
            first.opened, second.opened, now, first.sent + second.sent, Mood.HAPPY,
            self.config.blur_usage,
        )  # fmt: skip
        self.moods[Mood.HAPPY] += 1
        self._usage(record)
        return Step(closes=[(party, b""), (partner, b"")])

    # -- endings -------------------------------------------------------------------

    def _refuse(self, party: Party, mood: Mood, kind: str, line: bytes, now: float) -> Step:
        party.mood = mood
        self.refusals.note(kind, now)
        self._finish(party, now)
        return Step(closes=[(party, line)])

    def _finish(self, party: Party, now: float) -> None:
        """An unpaired connection ends: out of the table, its usage record out."""
        self._unwait(party)
        party.phase = Phase.DONE
        self.moods[party.mood] += 1
        self._usage(make_record(party.opened, None, now, 0, party.mood, self.config.blur_usage))

    def _unwait(self, party: Party) -> None:
        """Out of the pairing table and the timeouts' watch."""
        self._unpaired.discard(party)
        if party.phase is Phase.WAITING and party.token is not None:
            waiters = self._waiting.get(party.token)
            if waiters is not None and party in waiters:
                waiters.remove(party)
                if not waiters:
                    del self._waiting[party.token]

    def expire(self, now: float) -> Step:
        """Connections past a timeout, closed (called about once a second)."""
        config, step = self.config, Step()
        for party in list(self._unpaired):
            if party.phase is Phase.HANDSHAKE:
                if now - party.opened > config.handshake_timeout:
                    kind = Refusal.HANDSHAKE_TIMEOUT
                    step.closes += self._refuse(party, Mood.EMPTY, kind, b"", now).closes
            elif now - party.waiting_since > config.lonely_timeout:
                kind = Refusal.LONELY_TIMEOUT
                step.closes += self._refuse(party, Mood.LONELY, kind, b"", now).closes
        for first in list(self._pairs):
            partner = first.partner
            assert partner is not None
            if now - max(first.last_active, partner.last_active) > config.idle_timeout:
                self.refusals.note(Refusal.IDLE_TIMEOUT, now)
                step.closes += self.end_pair(first, now).closes
        return step

    def close_unpaired(self, now: float) -> Step:
        """Draining: no new pair can form, so every unpaired connection is closed."""
        self.draining = True
        step = Step()
        for party in list(self._unpaired):
            self._finish(party, now)
            step.closes.append((party, b""))
        return step

    def end_all_pairs(self, now: float) -> Step:
        """The drain time is over: every pair is ended."""
        step = Step()
        for first in list(self._pairs):
            step.closes += self.end_pair(first, now).closes
        return step
