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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pigeonhole import __version__
from pigeonhole.server.context import ServerContext
from pigeonhole.server.figure import Snapshot
from pigeonhole.server.figures import snapshot
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
    def read(cls, snap: Snapshot) -> Totals:
        """The counters of one snapshot (server/figures.py)."""
        relayed = snap.values.get("pigeonhole_transit_bytes_relayed_total", 0)
        results = snap.by_label("pigeonhole_exchanges_finished_total")
        permissions = snap.by_label("pigeonhole_permission_outcomes_total")
        moods = snap.by_label("pigeonhole_transit_connections_ended_total")
        return cls(
            connections=int(snap.number("pigeonhole_connections_total")),
            started=int(snap.number("pigeonhole_exchanges_started_total")),
            results=tuple(int(results.get(r, 0)) for r in RESULTS),
            messages=int(snap.number("pigeonhole_messages_total")),
            errors=int(sum(snap.by_label("pigeonhole_errors_total").values())),
            granted=int(permissions.get("granted", 0)),
            refused=int(permissions.get("refused", 0)),
            required=int(permissions.get("required", 0)),
            limits=tuple(
                (k, int(n)) for k, n in snap.by_label("pigeonhole_limit_hits_total").items()
            ),
            commits=snap.commit_count,
            commit_seconds=snap.commit_sum,
            commit_buckets=snap.commit_buckets,
            transit_bytes=int(relayed) if isinstance(relayed, int | float) else 0,
            transit_moods=tuple(int(moods.get(mood, 0)) for mood in MOODS),
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

    def __init__(self, server: ServerContext) -> None:
        self._server = server
        self.minutes: deque[Minute] = deque(maxlen=MINUTES)
        self._start = 0.0
        self._base = Totals()
        self._peak = 0

    def begin(self, now: float) -> None:
        """Start the first minute (the server has loaded its state)."""
        self._start = _minute_of(now)
        self._base = Totals.read(snapshot(self._server))
        self._peak = len(self._server.clients)
        self._server.rendezvous.created_by_app.clear()

    def tick(self) -> None:
        server = self._server
        live = len(server.clients)
        if live > self._peak:
            self._peak = live
        now = server.clock()
        if now < self._start + 60:
            return
        totals = Totals.read(snapshot(server))
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

    def current(self, snap: Snapshot) -> Minute:
        """The minute in progress, so far (`snap`: the figures now)."""
        server = self._server
        return Minute(
            self._start,
            max(self._peak, len(server.clients)),
            Totals.read(snap).minus(self._base),
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


def status_json(server: ServerContext, rings: StatusRings) -> dict[str, Any]:
    """What /status.json answers: the live figures, and the last hour minute by minute."""
    c = server.config
    rings.tick()  # a minute that ended since the last tick is closed first
    now = server.clock()
    snap = snapshot(server)  # every figure shown below is read from this one snapshot
    minutes = [*rings.minutes, rings.current(snap)]
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
    figure = snap.number
    ledger = server.ledger
    hour_mean, hour_p99 = _commit_ms(hour.commits, hour.commit_seconds, hour.commit_buckets)
    recent = _sum(gained[-2:])  # the last closed minute and the one in progress
    recent_mean, recent_p99 = _commit_ms(
        recent.commits, recent.commit_seconds, recent.commit_buckets
    )
    body: dict[str, Any] = {
        "version": __version__,
        "now": now,
        "started": server.uptime.started,
        "uptime": max(0.0, now - server.uptime.started),
        "refresh": c.status_refresh,
        "store": {
            "kind": server.storage.kind,
            "commit_sync": c.commit_sync,
            "peer_delivery": c.peer_delivery,
            "helper_starts": server.storage.helper_starts(),
            "node": server.decider.status(),
        },
        "health": server.health.problem() or "ok",
        "blurred": bool(c.blur_usage),
        "connections": {
            "now": int(figure("pigeonhole_connections")),
            "total": int(figure("pigeonhole_connections_total")),
        },
        "live": {
            "nameplates": int(figure("pigeonhole_nameplates")),
            "mailboxes": int(figure("pigeonhole_mailboxes")),
            "apps": len(server.rendezvous.apps),
        },
        "storage": {
            "stored_bytes": int(figure("pigeonhole_stored_bytes")),
            "max_stored_bytes": int(figure("pigeonhole_stored_bytes_limit")),
            "disk_free": None
            if figure("pigeonhole_disk_free_bytes") < 0
            else int(figure("pigeonhole_disk_free_bytes")),
            "disk_watermark": int(figure("pigeonhole_disk_free_watermark_bytes")),
            "disk_low": bool(figure("pigeonhole_disk_low")),
            "storage_down": bool(figure("pigeonhole_storage_down")),
            "body_cache_bytes": int(figure("pigeonhole_body_cache_bytes")),
            "body_cache_limit": c.body_cache_bytes,
            "usage_db_bytes": None
            if figure("pigeonhole_usage_db_bytes") < 0
            else int(figure("pigeonhole_usage_db_bytes")),
        },
        "archive": _archive(server),
        "transit": _transit(server, hour),
        # malformed input since start, most first: [door, kind, count]
        "bad_input": _bad_input(snap),
        "rules": _rules(server, snap),
        "reload": None if server.settings.reloaded is None else server.settings.reloaded.as_json(),
        "commits": {
            "recent_mean_ms": recent_mean,
            "recent_p99_ms": recent_p99,
            "hour_mean_ms": hour_mean,
            "hour_p99_ms": hour_p99,
            "batches": snap.commit_count,
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
    body["figures"] = figures_json(snap)
    if not c.blur_usage:
        body["addresses"] = {
            "connections": _top(server.clients.by_address),
            "stored_bytes": _top(ledger.bytes_by),
        }
        if server.archive is not None:
            body["addresses"]["archive_bytes"] = _top(Counter(server.archive.held_by()))
    return body


def figures_json(snap: Snapshot) -> dict[str, Any]:
    """Every figure by its /metrics name: a number, or {label values joined by "/": number}."""
    shown: dict[str, Any] = {}
    for name, value in snap.values.items():
        if isinstance(value, Mapping):
            shown[name] = {"/".join(key): n for key, n in sorted(value.items())}
        else:
            shown[name] = value
    for name, _, number in snap.decider:
        shown[name] = number
    return shown


def _bad_input(snap: Snapshot) -> list[list[Any]]:
    counts = snap.values.get("pigeonhole_bad_input_total", {})
    assert isinstance(counts, Mapping)
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return [[door, kind, int(n)] for (door, kind), n in ranked]


def _rules(server: ServerContext, snap: Snapshot) -> dict[str, Any]:
    """The --deny-file's rules in force, and who they denied (by door) and noticed."""
    deny_file = server.config.deny_file
    loaded = snap.by_label("pigeonhole_rules")
    return {
        "file": None if deny_file is None else str(deny_file),
        "deny": int(loaded.get("deny", 0)),
        "notice": int(loaded.get("notice", 0)),
        "denied": {k: int(n) for k, n in snap.by_label("pigeonhole_denied_by_rule_total").items()},
        "notices_sent": int(snap.number("pigeonhole_notices_sent_total")),
    }


def _top(counts: Counter[str]) -> list[list[Any]]:
    return [[k, v] for k, v in heapq.nlargest(TOP_ADDRESSES, counts.items(), key=_second)]


def _second(item: tuple[str, int]) -> int:
    return item[1]


def _transit(server: ServerContext, hour: Totals) -> dict[str, Any] | None:
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


def _archive(server: ServerContext) -> dict[str, object] | None:
    """The archive's holdings against its bounds (None: no archive served)."""
    if server.archive is None:
        return None
    return server.archive.figures()
