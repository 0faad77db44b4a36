"""Every counter and gauge the server shows, declared once, read into one snapshot.

A `Figure` names a Prometheus family (the names operators' dashboards use), its type, its
help, its labels, and where its value comes from in the context. `snapshot(ctx)` reads
them all at one instant; `/metrics` (server/exposition.py, through prometheus_client),
`/status.json` and the status page (server/status.py) render that snapshot, never the
sources: adding a figure is one declaration here plus its source, and
tests/server/test_figures.py fails when a declared figure is missing from any view.

A figure that only exists with a part (the relay, the archive, the store helper) is
declared with `when`; the decider's own figures (a node's batches and leadership) are
declared by the node (server/node/figures.py) and come in the snapshot as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from pigeonhole.server.context import ServerContext

#: a value: a number, or numbers by label values (one tuple entry per label)
Labelled = Mapping[tuple[str, ...], float]
Value = float | Labelled
Kind = Literal["counter", "gauge"]
#: the relay's refusals that are malformed input (its others are limits)
TRANSIT_BAD_INPUT = ("bad_handshake", "line_too_long")


@dataclass(frozen=True, slots=True)
class Sources:
    """What figures are read from, with the relay's and the archive's figures read once."""

    ctx: ServerContext
    relay: Mapping[str, Any]
    archive: Mapping[str, Any]

    @classmethod
    def of(cls, ctx: ServerContext) -> Sources:
        relay = ctx.transit.stats() if ctx.transit is not None else {}
        archive = ctx.archive.figures() if ctx.archive is not None else {}
        return cls(ctx, relay, archive)


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    kind: Kind
    help: str
    read: Callable[[Sources], Value]
    labels: tuple[str, ...] = ()
    #: present only when this holds (None: always)
    when: Callable[[ServerContext], bool] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The figures at one instant, by name, with the commit latency histogram and the
    decider's own figures (name, type, value)."""

    values: dict[str, Value]
    commit_buckets: tuple[int, ...]
    commit_count: int
    commit_sum: float
    decider: tuple[tuple[str, str, int], ...]

    def number(self, name: str) -> float:
        value = self.values[name]
        assert not isinstance(value, Mapping), name
        return value

    def by_label(self, name: str) -> dict[str, float]:
        """A one-label figure as {label value: number} (empty when absent)."""
        value = self.values.get(name)
        if not isinstance(value, Mapping):
            return {}
        return {key[0]: n for key, n in value.items()}


def _one(counts: Mapping[str, int]) -> Labelled:
    return {(key,): n for key, n in counts.items()}


def _relay_counts(name: str) -> Callable[[Sources], Labelled]:
    def read(s: Sources) -> Labelled:
        return {(str(key),): n for key, n in s.relay.get(name, {}).items()}

    return read


def _relay_number(name: str) -> Callable[[Sources], float]:
    def read(s: Sources) -> float:
        value = s.relay.get(name, 0)
        assert isinstance(value, int | float)
        return value

    return read


def bad_input(s: Sources) -> Labelled:
    """Malformed input by (door, kind): the server's doors, the archive's and the relay's."""
    counts: dict[tuple[str, ...], float] = dict(s.ctx.events.bad_input.counts.items())
    for kind, n in s.archive.get("malformed", {}).items():
        counts[("archive", kind)] = counts.get(("archive", kind), 0) + n
    refusals = s.relay.get("refusals", {})
    for kind in TRANSIT_BAD_INPUT:
        if refusals.get(kind):
            counts[("transit", kind)] = refusals[kind]
    return counts


def _has_relay(ctx: ServerContext) -> bool:
    return ctx.transit is not None and ctx.transit.port is not None


def _has_archive(ctx: ServerContext) -> bool:
    return ctx.archive is not None


def _has_helper(ctx: ServerContext) -> bool:
    return ctx.storage.helper_starts() is not None


def _archive_figure(key: str) -> Callable[[Sources], Value]:
    """One of the archive's own figures (a number, or numbers by reason)."""

    def read(s: Sources) -> Value:
        value = s.archive[key]
        return _one(value) if isinstance(value, dict) else cast(float, value)

    return read


def _usage_size(s: Sources) -> float:
    size = s.ctx.storage.usage_size()
    return size if size is not None else -1


def _rules(s: Sources) -> Labelled:
    rules = s.ctx.settings.rules
    return {("deny",): rules.denies, ("notice",): rules.notices}


def _disk_free(s: Sources) -> float:
    free = s.ctx.health.disk.free
    return free if free is not None else -1


C: Kind = "counter"
G: Kind = "gauge"

FIGURES: tuple[Figure, ...] = (
    # connections and the channels alive
    Figure(
        "pigeonhole_connections", G, "mailbox WebSockets open now", lambda s: len(s.ctx.clients)
    ),
    Figure(
        "pigeonhole_connections_total",
        C,
        "mailbox WebSockets accepted since start",
        lambda s: s.ctx.metrics.connections_total,
    ),
    Figure("pigeonhole_nameplates", G, "nameplates alive", lambda s: s.ctx.decider.alive()[0]),
    Figure("pigeonhole_mailboxes", G, "mailboxes alive", lambda s: s.ctx.decider.alive()[1]),
    # exchanges (a mailbox: created by a claim or an open, finished with its usage result)
    Figure(
        "pigeonhole_exchanges_started_total",
        C,
        "exchanges started (mailboxes created)",
        lambda s: s.ctx.rendezvous.mailboxes_created,
    ),
    Figure(
        "pigeonhole_exchanges_finished_total",
        C,
        "exchanges finished, by usage result",
        lambda s: _one(s.ctx.rendezvous.results),
        ("result",),
    ),
    # commands and what was refused
    Figure("pigeonhole_messages_total", C, "messages added", lambda s: s.ctx.metrics.messages),
    Figure(
        "pigeonhole_commands_total",
        C,
        "commands by type",
        lambda s: _one(s.ctx.metrics.commands),
        ("type",),
    ),
    Figure(
        "pigeonhole_errors_total",
        C,
        "errors by kind",
        lambda s: _one(s.ctx.metrics.errors),
        ("error",),
    ),
    Figure(
        "pigeonhole_permission_outcomes_total",
        C,
        "permission challenges granted, refused (bad stamp) and required (none sent)",
        lambda s: _one(s.ctx.metrics.permissions),
        ("outcome",),
    ),
    Figure(
        "pigeonhole_limit_hits_total",
        C,
        "limit and quota refusals by kind",
        lambda s: _one(s.ctx.metrics.limits),
        ("limit",),
    ),
    Figure(
        "pigeonhole_bad_input_total",
        C,
        "malformed input by door and kind (docs/architecture.md, Malformed input)",
        bad_input,
        ("door", "kind"),
    ),
    # rules that say why (--deny-file) and reloads (SIGHUP)
    Figure(
        "pigeonhole_denied_by_rule_total",
        C,
        "clients refused by a deny rule, by door",
        lambda s: _one(s.ctx.metrics.denied_by_rule),
        ("door",),
    ),
    Figure(
        "pigeonhole_notices_sent_total",
        C,
        "welcomes that carried a notice rule's message",
        lambda s: s.ctx.metrics.notices_sent,
    ),
    Figure("pigeonhole_rules", G, "rules loaded, by verb", _rules, ("verb",)),
    Figure(
        "pigeonhole_reloads_total",
        C,
        "reloads (SIGHUP) by result: ok, or refused (nothing changed)",
        lambda s: _one(s.ctx.metrics.reloads),
        ("result",),
    ),
    Figure(
        "pigeonhole_reload_last_timestamp_seconds",
        G,
        "when the last reload ended (0: none since start)",
        lambda s: s.ctx.settings.reloaded.at if s.ctx.settings.reloaded else 0,
    ),
    # the group commit
    Figure(
        "pigeonhole_commit_batches_total", C, "batches committed", lambda s: s.ctx.committer.batches
    ),
    Figure(
        "pigeonhole_commit_effects_total", C, "writes committed", lambda s: s.ctx.committer.effects
    ),
    Figure(
        "pigeonhole_commit_seconds_total",
        C,
        "seconds spent committing",
        lambda s: s.ctx.committer.commit_seconds_total,
    ),
    Figure(
        "pigeonhole_pruned_mailboxes_total",
        C,
        "idle mailboxes pruned",
        lambda s: s.ctx.metrics.pruned_mailboxes,
    ),
    Figure(
        "pigeonhole_storage_failures_total",
        C,
        "commits that failed (written again until they succeed)",
        lambda s: s.ctx.metrics.storage_failures,
    ),
    Figure(
        "pigeonhole_store_helper_starts_total",
        C,
        "store helper processes started (more than one: a helper died and was replaced)",
        lambda s: s.ctx.storage.helper_starts() or 0,
        when=_has_helper,
    ),
    # what is stored against its quotas, and the disk
    Figure("pigeonhole_stored_bytes", G, "body bytes stored", lambda s: s.ctx.ledger.stored_bytes),
    Figure(
        "pigeonhole_stored_bytes_limit",
        G,
        "--max-stored-bytes",
        lambda s: s.ctx.ledger.limits.max_stored_bytes,
    ),
    Figure(
        "pigeonhole_stored_addresses",
        G,
        "client addresses with bytes stored",
        lambda s: len(s.ctx.ledger.bytes_by),
    ),
    Figure(
        "pigeonhole_disk_free_bytes", G, "free bytes in --data-dir (-1: not measured)", _disk_free
    ),
    Figure(
        "pigeonhole_disk_free_watermark_bytes",
        G,
        "--disk-free-watermark",
        lambda s: s.ctx.health.disk.watermark,
    ),
    Figure(
        "pigeonhole_disk_low", G, "1 when below the watermark", lambda s: int(s.ctx.health.disk.low)
    ),
    Figure(
        "pigeonhole_storage_down",
        G,
        "1 while commits are failing",
        lambda s: int(s.ctx.ledger.storage_down),
    ),
    Figure(
        "pigeonhole_usage_db_bytes",
        G,
        "the usage database's size (-1: not measured yet)",
        _usage_size,
    ),
    Figure(
        "pigeonhole_body_cache_bytes",
        G,
        "message bodies cached in memory",
        lambda s: s.ctx.rendezvous.bodies.size,
    ),
    Figure(
        "pigeonhole_body_cache_entries",
        G,
        "bodies in the cache",
        lambda s: len(s.ctx.rendezvous.bodies),
    ),
    Figure(
        "pigeonhole_replay_store_reads_total",
        C,
        "replays that read bodies from the store",
        lambda s: s.ctx.storage.bodies.loads,
    ),
    # the archive
    Figure(
        "pigeonhole_archive_stored_bytes",
        G,
        "envelope bytes archived",
        _archive_figure("stored_bytes"),
        when=_has_archive,
    ),
    Figure(
        "pigeonhole_archive_stored_bytes_limit",
        G,
        "--archive-max-bytes",
        _archive_figure("max_bytes"),
        when=_has_archive,
    ),
    Figure(
        "pigeonhole_archive_stored_addresses",
        G,
        "client addresses with envelopes archived",
        _archive_figure("addresses"),
        when=_has_archive,
    ),
    Figure(
        "pigeonhole_archive_disk_free_threshold_bytes",
        G,
        "--archive-disk-free",
        _archive_figure("min_disk_free"),
        when=_has_archive,
    ),
    *(
        Figure(
            f"pigeonhole_archive_{field}_total",
            C,
            text,
            _archive_figure(field),
            when=_has_archive,
        )
        for field, text in (
            ("archived", "envelopes archived"),
            ("duplicates", "envelopes posted again"),
            ("served", "envelopes served in answer to requests"),
            ("requests", "requests answered"),
            ("refused", "requests and envelopes refused"),
            ("expired_deleted", "envelopes deleted by retention"),
        )
    ),
    *(
        Figure(
            f"pigeonhole_archive_{field}_total",
            C,
            text,
            _archive_figure(field),
            ("reason",),
            when=_has_archive,
        )
        for field, text in (
            ("refused_requests", "requests refused, by reason"),
            ("refused_envelopes", "envelopes refused, by reason"),
        )
    ),
    # the transit relay
    Figure(
        "pigeonhole_transit_connections",
        G,
        "relay connections open",
        _relay_number("connections"),
        when=_has_relay,
    ),
    Figure(
        "pigeonhole_transit_waiting",
        G,
        "relay connections waiting for a partner",
        _relay_number("waiting"),
        when=_has_relay,
    ),
    Figure(
        "pigeonhole_transit_active_pairs",
        G,
        "relay pairs moving bytes",
        _relay_number("active_pairs"),
        when=_has_relay,
    ),
    Figure(
        "pigeonhole_transit_bytes_relayed_total",
        C,
        "bytes relayed",
        _relay_number("bytes_relayed"),
        when=_has_relay,
    ),
    Figure(
        "pigeonhole_transit_refusals_total",
        C,
        "relay refusals by kind",
        _relay_counts("refusals"),
        ("kind",),
        when=_has_relay,
    ),
    Figure(
        "pigeonhole_transit_connections_ended_total",
        C,
        "relay connections ended, by mood",
        _relay_counts("moods"),
        ("mood",),
        when=_has_relay,
    ),
)


def declared(ctx: ServerContext) -> tuple[Figure, ...]:
    """The figures this server has (the relay's only with a relay, and so on)."""
    return tuple(f for f in FIGURES if f.when is None or f.when(ctx))


def snapshot(ctx: ServerContext) -> Snapshot:
    """Every figure, read now."""
    m = ctx.metrics
    sources = Sources.of(ctx)
    return Snapshot(
        values={f.name: f.read(sources) for f in declared(ctx)},
        commit_buckets=tuple(m.commit_buckets),
        commit_count=m.commit_count,
        commit_sum=m.commit_sum,
        decider=tuple(ctx.decider.figures()),
    )
