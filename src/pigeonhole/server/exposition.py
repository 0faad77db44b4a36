"""Prometheus text exposition of the server's counters and gauges."""

from __future__ import annotations

from collections import Counter

from pigeonhole.archive.endpoint import ARCHIVE_KEY
from pigeonhole.server.context import ServerView
from pigeonhole.server.metrics import COMMIT_BUCKETS


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labelled(name: str, label: str, counts: Counter[str]) -> list[str]:
    return [f"# TYPE {name} counter"] + [
        f'{name}{{{label}="{_escape(k)}"}} {v}' for k, v in sorted(counts.items())
    ]


def _histogram(server: ServerView) -> list[str]:
    m = server.metrics
    name = "pigeonhole_commit_latency_seconds"
    lines = [f"# TYPE {name} histogram"]
    lines += [
        f'{name}_bucket{{le="{bound}"}} {count}'
        for bound, count in zip(COMMIT_BUCKETS, m.commit_buckets, strict=True)
    ]
    lines += [
        f'{name}_bucket{{le="+Inf"}} {m.commit_count}',
        f"{name}_sum {m.commit_sum:.6f}",
        f"{name}_count {m.commit_count}",
    ]
    return lines


#: the relay's refusals that are malformed input (its others are limits)
TRANSIT_BAD_INPUT = ("bad_handshake", "line_too_long")


def bad_input_counts(server: ServerView) -> Counter[tuple[str, str]]:
    """Malformed input by (door, kind): the server's doors, the archive's and the relay's."""
    counts = Counter(server.bad_input.counts)
    if ARCHIVE_KEY in server.app:
        for kind, n in server.app[ARCHIVE_KEY].metrics.malformed.items():
            counts[("archive", kind)] += n
    stats = server.transit.stats() if server.transit is not None else {}
    for kind in TRANSIT_BAD_INPUT:
        if stats.get("refusals", {}).get(kind):
            counts[("transit", kind)] += stats["refusals"][kind]
    return counts


def _bad_input(server: ServerView) -> list[str]:
    name = "pigeonhole_bad_input_total"
    return [f"# TYPE {name} counter"] + [
        f'{name}{{door="{_escape(door)}",kind="{_escape(kind)}"}} {n}'
        for (door, kind), n in sorted(bad_input_counts(server).items())
    ]


def render_metrics(server: ServerView) -> str:
    m = server.metrics
    nameplates, mailboxes = server.alive()
    c = server.committer
    lines = [
        "# TYPE pigeonhole_connections gauge",
        f"pigeonhole_connections {len(server.connections)}",
        "# TYPE pigeonhole_connections_total counter",
        f"pigeonhole_connections_total {m.connections_total}",
        "# TYPE pigeonhole_nameplates gauge",
        f"pigeonhole_nameplates {nameplates}",
        "# TYPE pigeonhole_mailboxes gauge",
        f"pigeonhole_mailboxes {mailboxes}",
        "# TYPE pigeonhole_messages_total counter",
        f"pigeonhole_messages_total {m.messages}",
        *_labelled("pigeonhole_commands_total", "type", m.commands),
        *_labelled("pigeonhole_errors_total", "error", m.errors),
        *_labelled("pigeonhole_permission_outcomes_total", "outcome", m.permissions),
        *_labelled("pigeonhole_limit_hits_total", "limit", m.limits),
        *_bad_input(server),
        *_histogram(server),
        "# TYPE pigeonhole_commit_batches_total counter",
        f"pigeonhole_commit_batches_total {c.batches}",
        "# TYPE pigeonhole_commit_effects_total counter",
        f"pigeonhole_commit_effects_total {c.effects}",
        "# TYPE pigeonhole_commit_seconds_total counter",
        f"pigeonhole_commit_seconds_total {c.commit_seconds_total:.6f}",
        "# TYPE pigeonhole_pruned_mailboxes_total counter",
        f"pigeonhole_pruned_mailboxes_total {m.pruned_mailboxes}",
        "# TYPE pigeonhole_storage_failures_total counter",
        f"pigeonhole_storage_failures_total {m.storage_failures}",
        *_storage(server),
    ]
    if server.helper is not None:  # more than one: a helper died and was replaced
        lines += [
            "# TYPE pigeonhole_store_helper_starts_total counter",
            f"pigeonhole_store_helper_starts_total {server.helper.started}",
        ]
    lines += _decider(server)
    lines += _archive(server)
    lines += _transit(server)
    return "\n".join(lines) + "\n"


def _decider(server: ServerView) -> list[str]:
    """The decider's own figures (a node of a shared store: batches, collisions, ...)."""
    lines: list[str] = []
    for name, kind, value in server.decider.figures():
        lines += [f"# TYPE {name} {kind}", f"{name} {value}"]
    return lines


def _storage(server: ServerView) -> list[str]:
    """What is stored against its quota, the disk, and whether writes are refused."""
    ledger, disk = server.ledger, server.disk
    cache = server.rendezvous.bodies
    gauges = [
        ("pigeonhole_stored_bytes", ledger.stored_bytes),
        ("pigeonhole_stored_bytes_limit", ledger.limits.max_stored_bytes),
        ("pigeonhole_stored_addresses", len(ledger.bytes_by)),
        ("pigeonhole_disk_free_bytes", disk.free if disk.free is not None else -1),
        ("pigeonhole_disk_free_watermark_bytes", disk.watermark),
        ("pigeonhole_disk_low", int(disk.low)),
        ("pigeonhole_storage_down", int(ledger.storage_down)),
        ("pigeonhole_body_cache_bytes", cache.size),
        ("pigeonhole_body_cache_entries", len(cache)),
    ]
    lines: list[str] = []
    for name, value in gauges:
        lines += [f"# TYPE {name} gauge", f"{name} {value}"]
    lines += [
        "# TYPE pigeonhole_replay_store_reads_total counter",
        f"pigeonhole_replay_store_reads_total {server.bodies.loads}",
    ]
    return lines


def _transit(server: ServerView) -> list[str]:
    """The transit relay: connections, waiting, pairs, bytes, refusals and moods."""
    if server.transit is None:
        return []
    stats = server.transit.stats()
    if not stats:
        return []
    lines: list[str] = []
    for name, kind, value in (
        ("pigeonhole_transit_connections", "gauge", stats["connections"]),
        ("pigeonhole_transit_waiting", "gauge", stats["waiting"]),
        ("pigeonhole_transit_active_pairs", "gauge", stats["active_pairs"]),
        ("pigeonhole_transit_bytes_relayed_total", "counter", stats["bytes_relayed"]),
    ):
        lines += [f"# TYPE {name} {kind}", f"{name} {value}"]
    for metric, label, counts in (
        ("pigeonhole_transit_refusals_total", "kind", stats["refusals"]),
        ("pigeonhole_transit_connections_ended_total", "mood", stats["moods"]),
    ):
        lines.append(f"# TYPE {metric} counter")
        lines += [f'{metric}{{{label}="{_escape(str(k))}"}} {n}' for k, n in sorted(counts.items())]
    return lines


def _archive(server: ServerView) -> list[str]:
    if ARCHIVE_KEY not in server.app:
        return []
    service = server.app[ARCHIVE_KEY]
    c = service.config
    lines = []
    for name, value in (
        ("pigeonhole_archive_stored_bytes", service.quota.total),
        ("pigeonhole_archive_stored_bytes_limit", c.max_bytes),
        ("pigeonhole_archive_stored_addresses", len(service.quota.bytes_by)),
        ("pigeonhole_archive_disk_free_threshold_bytes", c.min_disk_free),
    ):
        lines += [f"# TYPE {name} gauge", f"{name} {value}"]
    for key, value in sorted(service.metrics.snapshot().items()):
        name, _, label = key.partition(".")
        metric = f"pigeonhole_archive_{name}_total"
        if label:
            lines.append(f'{metric}{{reason="{_escape(label)}"}} {value}')
        else:
            lines.append(f"# TYPE {metric} counter")
            lines.append(f"{metric} {value}")
    return lines
