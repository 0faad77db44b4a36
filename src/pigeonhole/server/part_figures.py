"""The relay's and the archive's figures, read from their own `figures()` (once per
snapshot, through `Sources`); declared only where the part runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from pigeonhole.server.context import ServerContext
from pigeonhole.server.figure import C, Figure, G, Labelled, Sources, Value, by_one_label


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


def _has_relay(ctx: ServerContext) -> bool:
    return ctx.transit is not None and ctx.transit.port is not None


def _has_archive(ctx: ServerContext) -> bool:
    return ctx.archive is not None


def _archive_figure(key: str) -> Callable[[Sources], Value]:
    """One of the archive's own figures (a number, or numbers by reason)."""

    def read(s: Sources) -> Value:
        value = s.archive[key]
        return by_one_label(value) if isinstance(value, dict) else cast(float, value)

    return read


PART_FIGURES: tuple[Figure, ...] = (
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
