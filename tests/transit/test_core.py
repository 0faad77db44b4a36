"""The sans-I/O core: handshake lines, the pairing table, moods and usage, timeouts, caps.

No sockets: the clock is a number passed in, and the endpoint only records what the
relay would have done with it.
"""

from __future__ import annotations

import pytest

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.core import BAD_HANDSHAKE, IMPATIENT, TransitCore
from pigeonhole.transit.handshake import Bad, LineBuffer, Request, parse_line
from pigeonhole.transit.limits import Refusal, TokenBucket
from pigeonhole.transit.party import Party, Phase, Step
from pigeonhole.transit.usage import Mood, UsageRecord, blur_size, make_record

TOKEN = "ab" * 32
SIDE_A, SIDE_B = "a" * 16, "b" * 16


class Recorder:
    """An endpoint that does nothing but exist (the core never calls it)."""

    def write(self, data: bytes) -> None: ...
    def write_pieces(self, pieces: list[bytes], size: int) -> None: ...
    def finish(self) -> None: ...
    def abort(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def buffered(self) -> int:
        return 0


def make_core(**settings: object) -> tuple[TransitCore, list[UsageRecord]]:
    records: list[UsageRecord] = []
    return TransitCore(TransitConfig(**settings), records.append, 1000.0), records  # type: ignore[arg-type]


def opened(core: TransitCore, now: float = 1000.0, address: str = "10.0.0.1") -> Party:
    party = core.open(address, Recorder(), now)
    assert isinstance(party, Party)
    return party


def hello(token: str = TOKEN, side: str | None = SIDE_A) -> bytes:
    return f"please relay {token}{'' if side is None else f' for side {side}'}\n".encode()


# -- the handshake line ------------------------------------------------------------


def test_parse_line_accepts_both_forms_and_nothing_else() -> None:
    assert parse_line(hello()[:-1]) == (TOKEN, SIDE_A)
    assert parse_line(hello(side=None)[:-1]) == (TOKEN, None)
    assert parse_line(hello()[:-1] + b"\r") is None
    assert parse_line(hello(token="ab" * 31)[:-1]) is None
    assert parse_line(b"please relay " + b"g" * 64 + b" for side " + b"-" * 16) is None


def test_line_buffer_joins_reads_and_keeps_the_rest() -> None:
    buffer = LineBuffer()
    line = hello()
    assert buffer.feed(line[:5]) is None
    assert buffer.feed(line[5:20]) is None
    assert buffer.feed(line[20:] + b"payload") == Request(TOKEN, SIDE_A, b"payload")


def test_line_buffer_limits() -> None:
    assert LineBuffer().feed(b"x" * 1025) == Bad(too_long=True)
    assert LineBuffer().feed(b"x" * 1024) is None
    assert LineBuffer().feed(b"x" * 1025 + b"\n") == Bad(too_long=True)
    assert LineBuffer().feed(b"x" * 1024 + b"\n") == Bad(too_long=False)


# -- pairing -----------------------------------------------------------------------


def test_pairing_old_new_and_same_side() -> None:
    core, _ = make_core()
    a, b, c = opened(core), opened(core), opened(core)
    assert core.receive(a, hello(side=SIDE_A), 1001) == Step()
    assert core.receive(b, hello(side=SIDE_A), 1001) == Step()  # same side: waits
    assert core.waiting == 2
    step = core.receive(c, hello(side=None), 1002)  # old form meets the first waiter
    assert step.paired is c and c.partner is a and a.partner is c
    assert step.closes == [(b, b"")] and b.mood is Mood.REDUNDANT
    assert (a.phase, b.phase, c.phase) == (Phase.PAIRED, Phase.DONE, Phase.PAIRED)
    assert core.active_pairs == 1 and core.waiting == 0


def test_after_a_pair_the_same_token_pairs_again() -> None:
    core, _ = make_core()
    first = [opened(core), opened(core)]
    core.receive(first[0], hello(side=SIDE_A), 1001)
    assert core.receive(first[1], hello(side=SIDE_B), 1001).paired is first[1]
    second = [opened(core), opened(core)]
    core.receive(second[0], hello(side="c" * 16), 1002)
    assert core.receive(second[1], hello(side="d" * 16), 1002).paired is second[1]


def test_bad_impatient_and_payload_after_the_line() -> None:
    core, records = make_core()
    bad, eager, waiter, newcomer = (opened(core) for _ in range(4))
    assert core.receive(bad, b"hello relay\n", 1001).closes == [(bad, BAD_HANDSHAKE)]
    assert core.receive(eager, hello() + b"data", 1001).closes == [(eager, IMPATIENT)]
    core.receive(waiter, hello(token="cd" * 32, side=SIDE_A), 1001)
    step = core.receive(newcomer, hello(token="cd" * 32, side=SIDE_B) + b"data", 1002)
    assert step.paired is newcomer and step.payload == b"data"
    assert newcomer.sent == 4
    assert [r.result for r in records] == [Mood.ERRORY, Mood.IMPATIENT]
    assert core.refusals.counts == {Refusal.BAD_HANDSHAKE: 1, Refusal.IMPATIENT: 1}


# -- moods and usage records -------------------------------------------------------


def test_one_happy_record_per_pair_with_both_directions() -> None:
    core, records = make_core()
    a, b = opened(core, 1000), opened(core, 1003)
    core.receive(a, hello(side=SIDE_A), 1000.5)
    core.receive(b, hello(side=SIDE_B), 1003.5)
    assert core.relayed(a, 700, 1004) is None
    assert core.relayed(b, 300, 1004) is None
    step = core.lost(b, 1010)  # the second closes first: still one happy record
    assert step.closes == [(b, b""), (a, b"")]
    assert core.lost(a, 1011) == Step()
    assert records == [UsageRecord(1000, 10, 3, 1000, Mood.HAPPY)]


def test_unpaired_moods() -> None:
    core, records = make_core()
    empty, lonely, partial = opened(core), opened(core), opened(core)
    core.receive(lonely, hello(), 1001)
    core.receive(partial, b"please rel", 1001)
    for party in (empty, lonely, partial):
        core.forget(party, 1005)
    assert [(r.result, r.total_time, r.waiting_time) for r in records] == [
        (Mood.EMPTY, 5, None),
        (Mood.LONELY, 5, None),
        (Mood.EMPTY, 5, None),
    ]
    assert core.connections == 0 and not core.addresses.connections


def test_blur_as_the_reference() -> None:
    assert [blur_size(n) for n in (0, 1, 10_000, 10_001, 999_999)] == [
        0, 10_000, 10_000, 20_000, 1_000_000,
    ]  # fmt: skip
    assert blur_size(1_000_001) == 2_000_000
    assert blur_size(1_500_000_001) == 1_600_000_000
    record = make_record(1234.5, None, 1300, 5, Mood.LONELY, blur=60)
    assert (record.started, record.total_bytes, record.total_time) == (1200, 10_000, 65.5)


# -- bounds ------------------------------------------------------------------------


def test_connection_caps() -> None:
    core, _ = make_core(max_connections_per_address=2, max_connections=3)
    opened(core, address="x"), opened(core, address="x")
    assert core.open("x", Recorder(), 1000) == Refusal.CONNECTIONS_PER_ADDRESS
    opened(core, address="y")
    assert core.open("z", Recorder(), 1000) == Refusal.CONNECTIONS


def test_timeouts() -> None:
    core, records = make_core(handshake_timeout=10, lonely_timeout=20, idle_timeout=30)
    silent, lonely, a, b = (opened(core) for _ in range(4))
    core.receive(lonely, hello(token="ef" * 32), 1005)
    core.receive(a, hello(side=SIDE_A), 1001)
    core.receive(b, hello(side=SIDE_B), 1001)
    assert core.expire(1010).closes == []
    assert core.expire(1010.5).closes == [(silent, b"")]
    assert core.expire(1025.5).closes == [(lonely, b"")]
    core.relayed(a, 1, 1020)
    assert core.expire(1050).closes == []
    assert sorted(id(p) for p, _ in core.expire(1050.5).closes) == sorted([id(a), id(b)])
    assert [r.result for r in records] == [Mood.EMPTY, Mood.LONELY, Mood.HAPPY]


@pytest.mark.parametrize(
    ("settings", "kind"),
    [
        ({"max_bytes_per_transfer": 1000}, Refusal.BYTES_PER_TRANSFER),
        ({"max_bytes_per_address_per_day": 1000}, Refusal.BYTES_PER_ADDRESS_PER_DAY),
    ],
)
def test_byte_caps_end_the_pair(settings: dict[str, int], kind: str) -> None:
    core, _ = make_core(**settings)
    a, b = opened(core), opened(core, address="10.0.0.2")
    core.receive(a, hello(side=SIDE_A), 1001)
    core.receive(b, hello(side=SIDE_B), 1001)
    assert core.relayed(a, 600, 1002) is None
    step = core.relayed(b, 600, 1002)
    assert step is not None and len(step.closes) == 2
    assert core.refusals.counts == {kind: 1}


def test_daily_bytes_start_again_the_next_day() -> None:
    core, _ = make_core()
    assert core.addresses.charge("x", 500, 86_400 * 3 + 5) == 500
    assert core.addresses.charge("x", 500, 86_400 * 3 + 6) == 1000
    assert core.addresses.charge("x", 500, 86_400 * 4 + 1) == 500


def test_token_bucket() -> None:
    bucket = TokenBucket(1000, now=0)
    assert bucket.allowance(0) == 1000
    bucket.spend(1500)
    assert bucket.allowance(0) == -500
    assert bucket.delay(0) == pytest.approx(0.5625)
    assert bucket.allowance(1) == 500


# -- a pair joined to another relay (peers.py) ----------------------------------------


def test_a_side_forwarded_to_another_relay_pairs_without_ok_or_record() -> None:
    core, records = make_core(max_bytes_per_address_per_day=100)
    client = opened(core)
    assert core.receive(client, hello(), 1000.0) == Step()
    step, link = core.forward(client, Recorder(), 1001.0)
    assert step.paired is link and not step.greet and link.partner is client
    assert client.phase is link.phase is Phase.PAIRED and core.waiting == 0
    assert core.connections == 2 and core.active_pairs == 1
    # the daily cap counts the client's address, never the link to the other relay
    assert core.relayed(link, 60, 1002.0) is None
    assert core.relayed(client, 30, 1002.0) is None
    assert core.addresses.bytes_today == {"10.0.0.1": 90}
    ended = core.relayed(link, 20, 1002.0)
    assert ended is not None and {p for p, _ in ended.closes} == {client, link}
    assert records == []  # the relay the pair met on keeps its record
    core.forget(client, 1003.0)
    core.forget(link, 1003.0)
    assert core.connections == 0


def test_a_link_with_its_waiters_ticket_counts_as_no_client() -> None:
    """On the relay where the first side waits, a side forwarded from another relay comes
    from that relay's address: with the waiter's ticket it is a link, charged to no
    client; with a wrong ticket it is an ordinary client of that address."""
    core, records = make_core(max_connections_per_address=2, max_bytes_per_address_per_day=100)
    ticket = "0f" * 16
    waiter = opened(core, address="10.0.0.1")
    assert core.receive(waiter, hello(side=SIDE_A), 1000.0) == Step()
    waiter.ticket = ticket
    node = "10.9.9.9"  # the forwarding relay's address
    impostor = opened(core, address=node)
    wrong = hello(side=SIDE_B)[:-1] + b" link " + b"1e" * 16 + b"\n"
    assert core.receive(impostor, wrong, 1000.5).paired is impostor  # pairs, as a client
    assert core.addresses.connections[node] == 1
    core.forget(impostor, 1000.6)
    core.forget(waiter, 1000.6)
    waiter = opened(core, address="10.0.0.1")
    core.receive(waiter, hello(side=SIDE_A), 1001.0)
    waiter.ticket = ticket
    link = opened(core, address=node)
    right = hello(side=SIDE_B)[:-1] + b" link " + ticket.encode() + b"\n"
    step = core.receive(link, right, 1001.5)
    assert step.paired is link and link.partner is waiter and step.greet  # `ok` from here
    assert node not in core.addresses.connections  # no longer the forwarding node's
    for _ in range(2):  # that address's own clients still have both their slots
        assert isinstance(core.open(node, Recorder(), 1001.6), Party)
    assert core.relayed(link, 90, 1002.0) is None  # the daily cap: the real client only
    assert core.addresses.bytes_today == {"10.0.0.1": 90}
    core.forget(link, 1003.0)
    core.forget(waiter, 1003.0)
    assert records[-1].result is Mood.HAPPY


def test_parse_the_link_form() -> None:
    ticket = "ab" * 16
    buffer = LineBuffer()
    verdict = buffer.feed(hello()[:-1] + b" link " + ticket.encode() + b"\nrest")
    assert verdict == Request(TOKEN, SIDE_A, b"rest", ticket)
    assert LineBuffer().feed(hello(side=None)[:-1] + b" link " + ticket.encode() + b"\n") == (
        Request(TOKEN, None, b"", ticket)
    )
    assert LineBuffer().feed(hello()[:-1] + b" link " + b"AB" * 16 + b"\n") == Bad(too_long=False)
