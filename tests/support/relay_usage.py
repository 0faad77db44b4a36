"""The reference transit relay's usage database (magic-wormhole-transit-relay 0.5.0,
`--usage-db`), made and filled by the relay's own code: its `create_db` and the
recorder its `UsageTracker` writes each record through."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from wormhole_transit_relay.database import create_db  # type: ignore[import-untyped]
from wormhole_transit_relay.usage import DatabaseUsageRecorder  # type: ignore[import-untyped]

#: (started, total_time, waiting_time, total_bytes, mood), as the relay records them
RelayRecord = tuple[float, float, float | None, int, str]


def relay_usage_db(path: Path, records: Iterable[RelayRecord]) -> None:
    """A new relay usage database at `path` holding `records`, in order."""
    db = create_db(str(path))
    try:
        recorder = DatabaseUsageRecorder(db)
        for started, total, waiting, total_bytes, mood in records:
            recorder.record_usage(started, total, waiting, total_bytes, mood)
    finally:
        db.close()
