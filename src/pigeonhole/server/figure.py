"""A figure: one counter or gauge as every view shows it, and the snapshot they render.

server/figures.py declares the server's figures, server/part_figures.py the relay's and
the archive's; `Sources` is what a figure reads, with those parts' figures read once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pigeonhole.server.context import ServerContext

#: a value: a number, or numbers by label values (one tuple entry per label)
Labelled = Mapping[tuple[str, ...], float]
Value = float | Labelled
Kind = Literal["counter", "gauge"]
C: Kind = "counter"
G: Kind = "gauge"


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


def by_one_label(counts: Mapping[str, int]) -> Labelled:
    return {(key,): n for key, n in counts.items()}
