"""Counters the server keeps for operators (exposed on /metrics in Prometheus text)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pigeonhole.protocol import errors as e
from pigeonhole.protocol.limits import LIMIT_ERRORS

#: commit latency histogram bucket bounds, in seconds
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


@dataclass
class Metrics:
    connections_total: int = 0
    messages: int = 0
    commands: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    permissions: Counter[str] = field(default_factory=Counter)
    limits: Counter[str] = field(default_factory=Counter)
    pruned_mailboxes: int = 0
    storage_failures: int = 0
    commit_buckets: list[int] = field(default_factory=lambda: [0] * len(COMMIT_BUCKETS))
    commit_count: int = 0
    commit_sum: float = 0.0
    #: clients refused by a deny rule, by door; welcomes that carried a notice rule's
    #: message; reloads by result (server/rules.py, server/reloader.py)
    denied_by_rule: Counter[str] = field(default_factory=Counter)
    notices_sent: int = 0
    reloads: Counter[str] = field(default_factory=Counter)

    def count_command(self, mtype: str) -> None:
        # bound the label set: unknown types are counted under one label
        self.commands[mtype if mtype in _KNOWN else "other"] += 1

    def count_error(self, explain: str) -> str:
        """Count an `error` by kind (a bounded label set); returns the kind."""
        kind = explain if explain in _KNOWN_ERRORS else _error_kind(explain)
        self.errors[kind] += 1
        if explain.startswith("submit-permissions failed"):
            self.permissions["refused"] += 1
        elif explain.startswith("permission required"):
            self.permissions["required"] += 1
        elif kind in LIMIT_ERRORS:
            self.limits[kind] += 1
        return kind

    def count_limit(self, kind: str) -> None:
        self.limits[kind] += 1

    def observe_commit(self, seconds: float) -> None:
        self.commit_count += 1
        self.commit_sum += seconds
        for i, bound in enumerate(COMMIT_BUCKETS):
            if seconds <= bound:
                self.commit_buckets[i] += 1


def _error_kind(explain: str) -> str:
    for prefix in ("nameplate ", "submit-permissions failed", "permission required"):
        if explain.startswith(prefix):
            return prefix.strip()
    for kind in LIMIT_ERRORS:
        if explain.startswith(kind):
            return kind
    if explain.endswith("must be a string") or explain.endswith("must be a hex string"):
        return "bad field"
    return "other"


_KNOWN = frozenset(
    {
        "ping",
        "bind",
        "list",
        "allocate",
        "claim",
        "release",
        "open",
        "add",
        "close",
        "submit-permissions",
        "submit-permission",
    }
)

_KNOWN_ERRORS = frozenset(
    value for name, value in vars(e).items() if name.isupper() and isinstance(value, str)
)
