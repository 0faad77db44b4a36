"""The live status page's figures: the server's own counters, sampled into fixed rings.

Once a second a timer (ServerView) calls `StatusRings.tick`: it notes the most live
connections seen and, when the wall-clock minute changes, closes the minute: what the
counters gained since its start goes into a ring of the last 60 minutes. Nothing is
counted per message or per connection for this: the counters are those the server keeps
anyway (server/metrics.py, and the exchanges in protocol/channels.py: one increment when
a mailbox is created and one when it finishes). `/status.json` (`status_json`) is built
on request from the ring and the minute in progress (docs/status.md).

It holds no client address unless `--blur-usage` is off, and never a mailbox id, a
nameplate or a message.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from pigeonhole import __version__
from pigeonhole.archive.endpoint import ARCHIVE_KEY
from pigeonhole.server.context import ServerView
from pigeonhole.server.exposition import bad_input_counts
from pigeonhole.server.metrics import COMMIT_BUCKETS
from pigeonhole.transit import Mood

#: mailbox usage results (protocol/usage.py), in the page's order
RESULTS = ("happy", "lonely", "scary", "errory", "pruney", "crowded", "quiet")
#: transit relay moods (transit/usage.py), in the page's order
MOODS = tuple(str(m) for m in Mood)
#: closed minutes kept: the page shows the last hour
MINUTES = 60
#: app ids kept per minute (the busiest), and the characters shown of one
TOP_APPS = 8
APP_CHARS = 64
#: client addresses listed (only without --blur-usage)
TOP_ADDRESSES = 5


@dataclass(slots=True)
class Totals:
    """The server's cumulative counters at one instant (or what they gained over a minute)."""

    connections: int = 0
    started: int = 0
    results: tuple[int, ...] = (0,) * len(RESULTS)
    messages: int = 0
    errors: int = 0
    granted: int = 0
    refused: int = 0
    required: int = 0
    limits: tuple[tuple[str, int], ...] = ()
    commits: int = 0
    commit_seconds: float = 0.0
    commit_buckets: tuple[int, ...] = (0,) * len(COMMIT_BUCKETS)
    #: the transit relay's bytes relayed, and its ended connections by mood
    transit_bytes: int = 0
    transit_moods: tuple[int, ...] = (0,) * len(MOODS)

    @classmethod
    def read(cls, server: ServerView) -> Totals:
        m, rz = server.metrics, server.rendezvous
        permissions = m.permissions
        relay = server.transit.stats() if server.transit is not None else {}
        moods = relay.get("moods", {})
        return cls(
            connections=m.connections_total,
            started=rz.mailboxes_created,
            results=tuple(rz.results[r] for r in RESULTS),
            messages=m.messages,
            errors=sum(m.errors.values()),
            granted=permissions["granted"],
            refused=permissions["refused"],
            required=permissions["required"],
            limits=tuple(m.limits.items()),
            commits=m.commit_count,
            commit_seconds=m.commit_sum,
            commit_buckets=tuple(m.commit_buckets),
            transit_bytes=relay.get("bytes_relayed", 0),
            transit_moods=tuple(moods.get(mood, 0) for mood in MOODS),
        )

    def minus(self, before: Totals) -> Totals:
        earlier = dict(before.limits)
        return Totals(
            connections=self.connections - before.connections,
            started=self.started - before.started,
            results=tuple(a - b for a, b in zip(self.results, before.results, strict=True)),
            messages=self.messages - before.messages,
            errors=self.errors - before.errors,
            granted=self.granted - before.granted,
            refused=self.refused - before.refused,
            required=self.required - before.required,
            limits=tuple(
                (kind, n - earlier.get(kind, 0))
                for kind, n in self.limits
                if n > earlier.get(kind, 0)
            ),
            commits=self.commits - before.commits,
            commit_seconds=self.commit_seconds - before.commit_seconds,
            commit_buckets=tuple(
                a - b for a, b in zip(self.commit_buckets, before.commit_buckets, strict=True)
            ),
            transit_bytes=self.transit_bytes - before.transit_bytes,
            transit_moods=tuple(
                a - b for a, b in zip(self.transit_moods, before.transit_moods, strict=True)
            ),
        )


@dataclass(slots=True)
class Minute:
    """One minute of the ring: when it began, the most connections seen, what was counted."""

    start: float
    peak: int
    gained: Totals
    #: the busiest app ids of the minute: (app id, mailboxes created)
    apps: tuple[tuple[str, int], ...]


class StatusRings:
    """The last hour, minute by minute, in a fixed ring; fed by `tick` once a second."""

    def __init__(self, server: ServerView) -> None:
        self._server = server
        self.minutes: deque[Minute] = deque(maxlen=MINUTES)
        self._start = 0.0
        self._base = Totals()
        self._peak = 0

    def begin(self, now: float) -> None:
        """Start the first minute (the server has loaded its state)."""
        self._start = _minute_of(now)
        self._base = Totals.read(self._server)
        self._peak = len(self._server.connections)
        self._server.rendezvous.created_by_app.clear()

    def tick(self) -> None:
        server = self._server
        live = len(server.connections)
        if live > self._peak:
            self._peak = live
        now = server.clock()
        if now < self._start + 60:
            return
        totals = Totals.read(server)
        by_app = server.rendezvous.created_by_app
        self.minutes.append(
            Minute(self._start, self._peak, totals.minus(self._base), _top_apps(by_app))
        )
        by_app.clear()
        # minutes with no tick (the machine slept, a test moved the clock): empty ones
        current = _minute_of(now)
        skipped = min(int((current - self._start) // 60) - 1, MINUTES)
        for i in range(skipped, 0, -1):
            self.minutes.append(Minute(current - 60 * i, live, Totals(), ()))
        self._start, self._base, self._peak = current, totals, live

    def current(self) -> Minute:
        """The minute in progress, so far."""
        server = self._server
        return Minute(
            self._start,
            max(self._peak, len(server.connections)),
            Totals.read(server).minus(self._base),
            _top_apps(server.rendezvous.created_by_app),
        )


def _minute_of(t: float) -> float:
    return float(math.floor(t / 60) * 60)


def _top_apps(by_app: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(by_app.most_common(TOP_APPS))


def _commit_ms(
    count: int, seconds: float, buckets: tuple[int, ...]
) -> tuple[float | None, float | None]:
    """(mean, 99th percentile's bucket bound) in ms; None for no commits, p99 None over 1 s."""
    if count <= 0:
        return None, None
    p99: float | None = None
    for bound, n in zip(COMMIT_BUCKETS, buckets, strict=True):
        if n >= 0.99 * count:
            p99 = bound * 1000
            break
    return round(1000 * seconds / count, 3), p99


def _sum(parts: list[Totals]) -> Totals:
    limits: Counter[str] = Counter()
    for t in parts:
        limits.update(dict(t.limits))
    return Totals(
        connections=sum(t.connections for t in parts),
        started=sum(t.started for t in parts),
        results=tuple(sum(t.results[i] for t in parts) for i in range(len(RESULTS))),
        messages=sum(t.messages for t in parts),
        errors=sum(t.errors for t in parts),
        granted=sum(t.granted for t in parts),
        refused=sum(t.refused for t in parts),
        required=sum(t.required for t in parts),
        limits=tuple(limits.items()),
        commits=sum(t.commits for t in parts),
        commit_seconds=sum(t.commit_seconds for t in parts),
        commit_buckets=tuple(
            sum(t.commit_buckets[i] for t in parts) for i in range(len(COMMIT_BUCKETS))
        ),
        transit_bytes=sum(t.transit_bytes for t in parts),
        transit_moods=tuple(sum(t.transit_moods[i] for t in parts) for i in range(len(MOODS))),
    )


def status_json(server: ServerView, rings: StatusRings) -> dict[str, Any]:
    """What /status.json answers: the live figures, and the last hour minute by minute."""
    c = server.config
    rings.tick()  # a minute that ended since the last tick is closed first
    now = server.clock()
    minutes = [*rings.minutes, rings.current()]
    gained = [m.gained for m in minutes]
    hour = _sum(gained)
    challenged = server.permissions.offers_hashcash
    finished = dict(zip(RESULTS, hour.results, strict=True))
    done = sum(hour.results)
    apps: Counter[str] = Counter()
    for m in minutes:
        apps.update(dict(m.apps))
    kinds = sorted(dict(hour.limits))
    per_minute_limits = [dict(t.limits) for t in gained]
    commit = [_commit_ms(t.commits, t.commit_seconds, t.commit_buckets) for t in gained]
    nameplates, mailboxes = server.alive()
    ledger, disk, cache = server.ledger, server.disk, server.rendezvous.bodies
    hour_mean, hour_p99 = _commit_ms(hour.commits, hour.commit_seconds, hour.commit_buckets)
    recent = _sum(gained[-2:])  # the last closed minute and the one in progress
    recent_mean, recent_p99 = _commit_ms(
        recent.commits, recent.commit_seconds, recent.commit_buckets
    )
    body: dict[str, Any] = {
        "version": __version__,
        "now": now,
        "started": server.started_at,
        "uptime": max(0.0, now - server.started_at),
        "refresh": c.status_refresh,
        "store": {
            "kind": server.storage.kind,
            "commit_sync": c.commit_sync,
            "peer_delivery": c.peer_delivery,
            "helper_starts": server.helper.started if server.helper is not None else None,
            "node": server.decider.status(),
        },
        "health": server.health_problem() or "ok",
        "blurred": bool(c.blur_usage),
        "connections": {"now": len(server.connections), "total": server.metrics.connections_total},
        "live": {
            "nameplates": nameplates,
            "mailboxes": mailboxes,
            "apps": len(server.rendezvous.apps),
        },
        "storage": {
            "stored_bytes": ledger.stored_bytes,
            "max_stored_bytes": ledger.limits.max_stored_bytes,
            "disk_free": disk.free,
            "disk_watermark": disk.watermark,
            "disk_low": disk.low,
            "storage_down": ledger.storage_down,
            "body_cache_bytes": cache.size,
            "body_cache_limit": c.body_cache_bytes,
        },
        "archive": _archive(server),
        "transit": _transit(server, hour),
        # malformed input since start, most first: [door, kind, count]
        "bad_input": [
            [door, kind, n] for (door, kind), n in bad_input_counts(server).most_common()
        ],
        "commits": {
            "recent_mean_ms": recent_mean,
            "recent_p99_ms": recent_p99,
            "hour_mean_ms": hour_mean,
            "hour_p99_ms": hour_p99,
            "batches": server.metrics.commit_count,
        },
        "permissions": {
            "methods": list(c.permissions),
            "hashcash_bits": server.permissions.current_bits(now) if challenged else None,
        },
        "hour": {
            "connections_new": hour.connections,
            "started": hour.started,
            "finished": finished,
            "finished_total": done,
            "success_rate": finished["happy"] / done if done else None,
            "messages": hour.messages,
            "errors": hour.errors,
            "apps": [[app[:APP_CHARS], n] for app, n in apps.most_common(TOP_APPS)],
            "limits": dict(sorted(dict(hour.limits).items(), key=lambda kv: -kv[1])),
            "permissions": {
                "challenged": hour.connections if challenged else 0,
                "granted": hour.granted,
                "refused": hour.refused,
                "required": hour.required,
            },
        },
        "minutes": {
            "start": [m.start for m in minutes],
            "connections_peak": [m.peak for m in minutes],
            "connections_new": [t.connections for t in gained],
            "started": [t.started for t in gained],
            "finished": {r: [t.results[i] for t in gained] for i, r in enumerate(RESULTS)},
            "messages": [t.messages for t in gained],
            "errors": [t.errors for t in gained],
            "challenged": [t.connections if challenged else 0 for t in gained],
            "granted": [t.granted for t in gained],
            "refused": [t.refused for t in gained],
            "required": [t.required for t in gained],
            "limits": {k: [lm.get(k, 0) for lm in per_minute_limits] for k in kinds},
            "commit_mean_ms": [mean for mean, _ in commit],
            "commit_p99_ms": [p99 for _, p99 in commit],
            "transit_bytes": [t.transit_bytes for t in gained],
            "transit_pairs": [t.transit_moods[0] for t in gained],
        },
    }
    if not c.blur_usage:
        body["addresses"] = {
            "connections": _top(server.connections_by_address),
            "stored_bytes": _top(ledger.bytes_by),
        }
        if ARCHIVE_KEY in server.app:
            body["addresses"]["archive_bytes"] = _top(server.app[ARCHIVE_KEY].quota.bytes_by)
    return body


def _top(counts: Counter[str]) -> list[list[Any]]:
    return [[k, v] for k, v in heapq.nlargest(TOP_ADDRESSES, counts.items(), key=_second)]


def _second(item: tuple[str, int]) -> int:
    return item[1]


def _transit(server: ServerView, hour: Totals) -> dict[str, Any] | None:
    """The relay now (waiting, pairs, bytes so far, refusals) and its last hour's moods."""
    if server.transit is None:
        return None
    return {
        "port": server.transit.port,
        **server.transit.stats(),
        "hour": {
            "bytes": hour.transit_bytes,
            "moods": dict(zip(MOODS, hour.transit_moods, strict=True)),
        },
    }


def _archive(server: ServerView) -> dict[str, object] | None:
    """The archive's holdings against its bounds (None: no archive served)."""
    if ARCHIVE_KEY not in server.app:
        return None
    return server.app[ARCHIVE_KEY].figures()
