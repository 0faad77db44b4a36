"""Every counter and gauge the server shows, declared once, read into one snapshot.

A `Figure` names a Prometheus family (the names operators' dashboards use), its type, its
help, its labels, and where its value comes from in the context. `snapshot(ctx)` reads
them all at one instant; `/metrics` (server/exposition.py, through prometheus_client),
`/status.json` and the status page (server/status.py) render that snapshot, never the
sources: adding a figure is one declaration here plus its source, and
tests/server/test_figures.py fails when a declared figure is missing from any view.

A figure that only exists with a part (the relay, the archive, the store helper) is
declared with `when` (the relay's and the archive's in server/part_figures.py, the types
in server/figure.py); the decider's own figures (a node's batches and leadership) are
declared by the node (server/node/figures.py) and come in the snapshot as they are.
"""

from __future__ import annotations

from pigeonhole.server.collector import COLLECTOR
from pigeonhole.server.context import ServerContext
from pigeonhole.server.figure import (
    C,
    Figure,
    G,
    Labelled,
    Snapshot,
    Sources,
    by_one_label,
)
from pigeonhole.server.part_figures import PART_FIGURES

#: the relay's refusals that are malformed input (its others are limits)
TRANSIT_BAD_INPUT = ("bad_handshake", "line_too_long")


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


def _has_helper(ctx: ServerContext) -> bool:
    return ctx.storage.helper_starts() is not None


def _usage_size(s: Sources) -> float:
    size = s.ctx.storage.usage_size()
    return size if size is not None else -1


def _rules(s: Sources) -> Labelled:
    rules = s.ctx.settings.rules
    return {("deny",): rules.denies, ("notice",): rules.notices}


def _disk_free(s: Sources) -> float:
    free = s.ctx.health.disk.free
    return free if free is not None else -1


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
        lambda s: by_one_label(s.ctx.rendezvous.results),
        ("result",),
    ),
    # commands and what was refused
    Figure("pigeonhole_messages_total", C, "messages added", lambda s: s.ctx.metrics.messages),
    Figure(
        "pigeonhole_commands_total",
        C,
        "commands by type",
        lambda s: by_one_label(s.ctx.metrics.commands),
        ("type",),
    ),
    Figure(
        "pigeonhole_errors_total",
        C,
        "errors by kind",
        lambda s: by_one_label(s.ctx.metrics.errors),
        ("error",),
    ),
    Figure(
        "pigeonhole_permission_outcomes_total",
        C,
        "permission challenges granted, refused (bad stamp) and required (none sent)",
        lambda s: by_one_label(s.ctx.metrics.permissions),
        ("outcome",),
    ),
    Figure(
        "pigeonhole_limit_hits_total",
        C,
        "limit and quota refusals by kind",
        lambda s: by_one_label(s.ctx.metrics.limits),
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
        lambda s: by_one_label(s.ctx.metrics.denied_by_rule),
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
        lambda s: by_one_label(s.ctx.metrics.reloads),
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
    # the process
    Figure(
        "pigeonhole_gc_collections_total",
        C,
        "garbage collections by generation (2: full)",
        lambda s: COLLECTOR.by_generation(COLLECTOR.collections),
        ("generation",),
    ),
    Figure(
        "pigeonhole_gc_seconds_total",
        C,
        "seconds the garbage collector stopped the process, by generation",
        lambda s: COLLECTOR.by_generation(COLLECTOR.seconds),
        ("generation",),
    ),
    *PART_FIGURES,
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
