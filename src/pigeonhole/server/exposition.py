"""/metrics: the figures' snapshot (server/figures.py) in Prometheus text, by prometheus_client.

A custom collector turns one snapshot into metric families: each declared figure as its
counter or gauge (labelled ones with their labels), the commit latency histogram, and the
decider's own figures. prometheus_client writes the text (escaping, number format).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from pigeonhole.server.context import ServerContext
from pigeonhole.server.figure import Snapshot
from pigeonhole.server.figures import declared, snapshot
from pigeonhole.server.metrics import COMMIT_BUCKETS

#: the histogram's name (its buckets are kept by server/metrics.py)
COMMIT_LATENCY = "pigeonhole_commit_latency_seconds"


class _Figures(Collector):
    """The families of one server's figures, read afresh at each collection."""

    def __init__(self, ctx: ServerContext) -> None:
        self._ctx = ctx

    def collect(self) -> Iterator[Metric]:
        snap = snapshot(self._ctx)
        yield from families(self._ctx, snap)


def families(ctx: ServerContext, snap: Snapshot) -> Iterator[Metric]:
    """Every figure of `snap` as a metric family."""
    for figure in declared(ctx):
        value = snap.values[figure.name]
        family = _family(figure.kind, figure.name, figure.help, figure.labels)
        if isinstance(value, Mapping):
            for labels, number in sorted(value.items()):
                family.add_metric(list(labels), number)
        else:
            family.add_metric([], value)
        yield family
    cumulative = [
        (str(bound), n) for bound, n in zip(COMMIT_BUCKETS, snap.commit_buckets, strict=True)
    ]
    yield HistogramMetricFamily(
        COMMIT_LATENCY,
        "group commit latency",
        buckets=[*cumulative, ("+Inf", snap.commit_count)],
        sum_value=snap.commit_sum,
    )
    for name, kind, number in snap.decider:
        family = _family("counter" if kind == "counter" else "gauge", name, "", ())
        family.add_metric([], number)
        yield family


def _family(
    kind: str, name: str, text: str, labels: tuple[str, ...]
) -> CounterMetricFamily | GaugeMetricFamily:
    if kind == "counter":
        return CounterMetricFamily(name, text, labels=list(labels))
    return GaugeMetricFamily(name, text, labels=list(labels))


class Exposition:
    """One registry per server, holding its collector: `render()` is /metrics' body."""

    def __init__(self, ctx: ServerContext) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Figures(ctx))

    def render(self) -> bytes:
        return generate_latest(self._registry)
