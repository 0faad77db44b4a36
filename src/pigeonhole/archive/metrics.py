"""Counters the archive keeps for operators (the server exposes them on /metrics)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ArchiveMetrics:
    """Monotonic counters; `refused_*` are keyed by a short, fixed reason label."""

    #: envelopes newly committed to the archive
    archived: int = 0
    #: envelopes posted again that were already archived
    duplicates: int = 0
    #: envelopes sent in answer to requests
    served: int = 0
    #: requests answered with a success completion
    requests: int = 0
    #: requests answered with an ERROR= completion, by reason
    refused_requests: Counter[str] = field(default_factory=Counter)
    #: posted envelopes not archived, by reason
    refused_envelopes: Counter[str] = field(default_factory=Counter)
    #: envelopes deleted by retention
    expired_deleted: int = 0
    #: malformed input (a bad handshake, a text frame, a packet that is not RLP), by kind
    malformed: Counter[str] = field(default_factory=Counter)

    @property
    def refused(self) -> int:
        """Everything refused: requests and envelopes."""
        return sum(self.refused_requests.values()) + sum(self.refused_envelopes.values())

    def snapshot(self) -> dict[str, int]:
        """A flat view, e.g. for a /metrics page: `refused_requests.rate` and so on."""
        flat = {
            "archived": self.archived,
            "duplicates": self.duplicates,
            "served": self.served,
            "requests": self.requests,
            "refused": self.refused,
            "expired_deleted": self.expired_deleted,
        }
        for name in ("refused_requests", "refused_envelopes"):
            counter: Counter[str] = getattr(self, name)
            flat.update({f"{name}.{reason}": n for reason, n in sorted(counter.items())})
        return flat
