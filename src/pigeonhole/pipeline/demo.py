"""`demo-data`: realistic synthetic usage in the exporter's dataset layout (no server needed).

The shape follows what a public mailbox server sees: a weekly and a diurnal load curve, one
dominant AppID, results happy 76% / lonely 11% / pruney 6% / errory 3% / scary 2% /
crowded 2%, log-normal waiting and transfer times (NULL waiting time when only one side
came), a few long transfers that cross hours and midnight, client versions whose newest
release gains share over the period, and connection-count samples every minute. With
`incidents`, one night hour holds a code-guessing burst (scary) and one day a crowded burst,
so the report's abuse signals have something to find. The transit relay's records come
from a random generator of their own (so the mailbox data does not change with them): about
four in ten transfers go through the relay, mostly happy pairs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

from pigeonhole.pipeline.config import DemoConfig
from pigeonhole.pipeline.dataset import CURRENT_SCHEMA, DAY_US, SCHEMAS, CommitResult, DatasetWriter

MAIN_APP = "lothar.com/wormhole/text-or-file-xfer"
_APPS = (
    MAIN_APP,
    "example.org/desktop-share",
    "example.net/ssh-invite",
    "example.com/pairing",
    "example.org/tunnel",
    *(f"example.test/app-{i}" for i in range(1, 8)),
)
_APP_WEIGHTS = np.array([0.82, 0.06, 0.04, 0.03, 0.02, *([0.03 / 7] * 7)])
_RESULTS = np.array(["happy", "lonely", "scary", "errory", "pruney", "crowded"])
_RESULT_WEIGHTS = np.array([0.76, 0.11, 0.02, 0.03, 0.06, 0.02])
_SIDES = {"happy": 2, "lonely": 1, "scary": 2, "errory": 2, "pruney": 1, "crowded": 3}
_NAMEPLATE_RESULT = {
    "happy": "happy",
    "lonely": "lonely",
    "scary": "happy",
    "errory": "happy",
    "pruney": "pruney",
    "crowded": "crowded",
}
#: share of transfers per UTC hour: busiest in the European afternoon and American morning
_DIURNAL = np.array([3, 2, 2, 2, 2, 3, 4, 6, 8, 9, 9, 9, 9, 10, 10, 10, 9, 8, 7, 6, 5, 5, 4, 3.0])
_PYTHON_VERSIONS = ("0.21.0", "0.22.0", "0.23.0", "0.24.0")
_OTHER_CLIENTS = (("go", "v1.0.7"), ("rust", "0.7.1"), ("js", "0.3.0"))
_HOUR_US = 3_600_000_000
_SAMPLE_US = 60_000_000


@dataclass
class _Day:
    """One day's generated mailboxes, as numpy columns."""

    app: np.ndarray
    result: np.ndarray
    start: np.ndarray
    waiting: np.ndarray
    total: np.ndarray
    for_nameplate: np.ndarray


def generate(config: DemoConfig) -> CommitResult:
    """Write `config.transfers` mailboxes (and what goes with them) over `config.days` days."""
    rng = np.random.default_rng(config.seed)
    first = (config.end_day - dt.timedelta(days=config.days - 1)).toordinal()
    epoch = dt.date(1970, 1, 1).toordinal()
    weekday = np.array(
        [0.8 if dt.date.fromordinal(first + i).weekday() >= 5 else 1.0 for i in range(config.days)]
    )
    weights = weekday * rng.uniform(0.9, 1.1, config.days)
    per_day = rng.multinomial(config.transfers, weights / weights.sum())
    writer = DatasetWriter(config.out_dir)
    writer.recover()
    ids = dict.fromkeys(SCHEMAS, 0)
    spans: dict[str, list[np.ndarray]] = {"mailboxes": [], "nameplates": []}
    for index, count in enumerate(per_day):
        day = _make_day(rng, first - epoch + index, int(count))
        if config.incidents and config.days >= 8:
            _add_incidents(rng, day, index, config.days)
        _stage_day(writer, rng, day, index / max(1, config.days - 1), ids, spans)
    start_us = (first - epoch) * DAY_US
    _stage_samples(writer, rng, spans, start_us, start_us + config.days * DAY_US, ids)
    transit_rng = np.random.default_rng(config.seed + 1)
    for index, count in enumerate(per_day):
        _stage_transit(writer, transit_rng, first - epoch + index, int(count * 0.4), ids)
    return writer.commit(ids)


def _make_day(rng: np.random.Generator, day_number: int, n: int) -> _Day:
    hours = rng.choice(24, size=n, p=_DIURNAL / _DIURNAL.sum())
    start = day_number * DAY_US + hours * _HOUR_US + rng.integers(0, _HOUR_US, n)
    result = rng.choice(_RESULTS, size=n, p=_RESULT_WEIGHTS)
    waiting = rng.lognormal(np.log(25.0), 1.3, n)
    duration = np.select(
        [
            result == "happy",
            result == "scary",
            result == "errory",
            result == "crowded",
            result == "lonely",
            result == "pruney",
        ],
        [
            np.minimum(rng.lognormal(np.log(20.0), 1.6, n), 6 * 3600.0),
            rng.uniform(1, 5, n),
            rng.lognormal(np.log(10.0), 1.0, n),
            rng.uniform(660, 1800, n),
            np.minimum(rng.lognormal(np.log(90.0), 1.2, n), 3600.0),
            rng.uniform(600, 7200, n),
        ],
    )
    long_transfer = (result == "happy") & (rng.random(n) < 0.01)
    duration = np.where(long_transfer, rng.uniform(3600, 4 * 3600, n), duration)
    one_side = np.isin(result, ["lonely", "pruney"])
    total = np.where(one_side, duration, waiting + duration)
    return _Day(
        app=rng.choice(np.array(_APPS), size=n, p=_APP_WEIGHTS),
        result=result,
        start=start,
        waiting=np.where(one_side, np.nan, waiting),
        total=total,
        for_nameplate=rng.random(n) < 0.97,
    )


def _add_incidents(rng: np.random.Generator, day: _Day, index: int, days: int) -> None:
    n = len(day.result)
    if index == (2 * days) // 3:  # a code-guessing hour at 03:00: wrong codes end scary
        chosen = (day.app == MAIN_APP) & (rng.random(n) < 0.3)
        day.start[chosen] = (
            (day.start[chosen] // DAY_US) * DAY_US
            + 3 * _HOUR_US
            + rng.integers(0, _HOUR_US, int(chosen.sum()))
        )
        day.result[chosen], day.app[chosen] = "scary", MAIN_APP
        day.waiting[chosen] = rng.uniform(0.5, 3, int(chosen.sum()))
        day.total[chosen] = day.waiting[chosen] + rng.uniform(0.5, 2, int(chosen.sum()))
    if index == (5 * days) // 6:  # a third side keeps joining the tunnel app's channels
        chosen = (day.app == "example.org/tunnel") | (rng.random(n) < 0.04)
        day.result[chosen], day.app[chosen] = "crowded", "example.org/tunnel"


def _stage_day(
    writer: DatasetWriter,
    rng: np.random.Generator,
    day: _Day,
    progress: float,
    ids: dict[str, int],
    spans: dict[str, list[np.ndarray]],
) -> None:
    order = np.argsort(day.start + (day.total * 1e6).astype(np.int64), kind="stable")
    for name in ("app", "result", "start", "waiting", "total", "for_nameplate"):
        setattr(day, name, getattr(day, name)[order])
    end = day.start + np.floor(day.total * 1e6).astype(np.int64)
    writer.stage(
        "mailboxes",
        _table(
            "mailboxes",
            ids,
            {
                "app_id": day.app,
                "for_nameplate": day.for_nameplate,
                "started": day.start,
                "waiting_time": day.waiting,
                "total_time": day.total,
                "result": day.result,
            },
        ),
    )
    spans["mailboxes"].append(np.stack([day.start, end]))
    plate = day.for_nameplate
    two_sided = ~np.isnan(day.waiting[plate])
    plate_total = np.where(
        two_sided,
        np.nan_to_num(day.waiting[plate]) + rng.uniform(0.2, 2.0, int(plate.sum())),
        day.total[plate],
    )
    writer.stage(
        "nameplates",
        _table(
            "nameplates",
            ids,
            {
                "app_id": day.app[plate],
                "started": day.start[plate],
                "waiting_time": day.waiting[plate],
                "total_time": plate_total,
                "result": np.vectorize(_NAMEPLATE_RESULT.__getitem__, otypes=[object])(
                    day.result[plate]
                )
                if plate.any()
                else np.array([], dtype=object),
            },
        ),
    )
    spans["nameplates"].append(
        np.stack(
            [day.start[plate], day.start[plate] + np.floor(plate_total * 1e6).astype(np.int64)]
        )
    )
    _stage_clients(writer, rng, day, progress, ids)


def _stage_clients(
    writer: DatasetWriter, rng: np.random.Generator, day: _Day, progress: float, ids: dict[str, int]
) -> None:
    sides = (
        np.vectorize(_SIDES.__getitem__, otypes=[np.int64])(day.result)
        if len(day.result)
        else np.array([], dtype=np.int64)
    )
    owner = np.repeat(np.arange(len(sides)), sides)
    rank = np.arange(len(owner)) - np.repeat(np.cumsum(sides) - sides, sides)
    offset = np.where(rank == 0, 0.0, np.nan_to_num(day.waiting[owner]) + (rank - 1) * 30.0)
    connect = day.start[owner] + (offset * 1e6).astype(np.int64)
    n = len(owner)
    weights = np.array(
        [0.2 * (1 - progress) + 0.05, 0.3 * (1 - progress) + 0.1, 0.3, 0.2 + 0.5 * progress]
    )
    python = rng.choice(np.array(_PYTHON_VERSIONS), size=n, p=weights / weights.sum())
    kind = rng.choice(5, size=n, p=[0.70, 0.14, 0.10, 0.03, 0.03])
    impl = np.where(
        kind == 0,
        "python",
        np.array([c[0] for c in _OTHER_CLIENTS] + ["", ""])[np.clip(kind - 1, 0, 4)],
    )
    version = np.where(
        kind == 0,
        python,
        np.array([c[1] for c in _OTHER_CLIENTS] + ["", ""])[np.clip(kind - 1, 0, 4)],
    )
    missing = kind == 4
    order = np.argsort(connect, kind="stable")
    writer.stage(
        "client_versions",
        _table(
            "client_versions",
            ids,
            {
                "app_id": day.app[owner][order],
                "side": _random_sides(rng, n)[order],
                "connect_time": connect[order],
                "implementation": pa.array(impl[order], pa.string(), mask=missing[order]),
                "version": pa.array(version[order], pa.string(), mask=missing[order]),
            },
        ),
    )


def _stage_samples(
    writer: DatasetWriter,
    rng: np.random.Generator,
    spans: dict[str, list[np.ndarray]],
    start: int,
    stop: int,
    ids: dict[str, int],
) -> None:
    times = np.arange(start, stop, _SAMPLE_US)
    alive = {}
    for name, parts in spans.items():
        both = np.concatenate(parts, axis=1) if parts else np.zeros((2, 0), np.int64)
        alive[name] = np.searchsorted(np.sort(both[0]), times, side="right") - np.searchsorted(
            np.sort(both[1]), times, side="right"
        )
    subscribed = np.rint(alive["mailboxes"] * 1.6).astype(np.int64)
    connections = (
        subscribed + np.rint(subscribed * 0.15).astype(np.int64) + rng.poisson(2, len(times))
    )
    writer.stage(
        "connection_counts",
        _table(
            "connection_counts",
            ids,
            {
                "sampled": times,
                "connections": connections,
                "bound": connections - rng.binomial(connections, 0.03),
                "subscribed": subscribed,
                "nameplates": alive["nameplates"],
                "mailboxes": alive["mailboxes"],
            },
        ),
    )
    updated = stop  # the data is complete up to the end of the last day
    writer.stage_current(
        pa.table(
            {
                "rebooted": pa.array([start], pa.int64()).cast(
                    CURRENT_SCHEMA.field("rebooted").type
                ),
                "updated": pa.array([updated], pa.int64()).cast(
                    CURRENT_SCHEMA.field("updated").type
                ),
                "blur_time": pa.array([None], pa.int64()),
                "connections": pa.array([int(connections[-1]) if len(times) else 0], pa.int64()),
            },
            schema=CURRENT_SCHEMA,
        )
    )


_MOODS = np.array(["happy", "lonely", "redundant", "errory", "impatient", "empty"])
_MOOD_WEIGHTS = np.array([0.70, 0.12, 0.08, 0.04, 0.01, 0.05])


def _stage_transit(
    writer: DatasetWriter, rng: np.random.Generator, day_number: int, n: int, ids: dict[str, int]
) -> None:
    """One day's relay records: pairs wait a second or so and carry log-normal sizes."""
    hours = rng.choice(24, size=n, p=_DIURNAL / _DIURNAL.sum())
    start = day_number * DAY_US + hours * _HOUR_US + rng.integers(0, _HOUR_US, n)
    mood = rng.choice(_MOODS, size=n, p=_MOOD_WEIGHTS)
    paired = mood == "happy"
    waiting = rng.lognormal(np.log(1.5), 1.0, n)
    relaying = np.minimum(rng.lognormal(np.log(30.0), 1.5, n), 4 * 3600.0)
    alone = np.where(mood == "lonely", rng.lognormal(np.log(60.0), 1.0, n), rng.uniform(0, 3, n))
    size = np.minimum(rng.lognormal(np.log(20e6), 2.0, n), 50e9).astype(np.int64)
    order = np.argsort(start, kind="stable")
    writer.stage(
        "transit",
        _table(
            "transit",
            ids,
            {
                "started": start[order],
                "total_time": np.where(paired, waiting + relaying, alone)[order],
                "waiting_time": np.where(paired, waiting, np.nan)[order],
                "total_bytes": np.where(paired, size, 0)[order],
                "result": mood[order],
            },
        ),
    )


def _table(name: str, ids: dict[str, int], columns: dict[str, object]) -> pa.Table:
    schema = SCHEMAS[name]
    n = len(next(iter(columns.values())))  # type: ignore[arg-type]
    arrays: dict[str, object] = {"id": np.arange(ids[name] + 1, ids[name] + 1 + n, dtype=np.int64)}
    ids[name] += n
    for field in schema:
        if field.name in columns:
            value = columns[field.name]
            if isinstance(value, pa.Array):
                arrays[field.name] = value
            elif pa.types.is_timestamp(field.type):
                arrays[field.name] = pa.array(value, pa.int64()).cast(field.type)
            elif pa.types.is_floating(field.type):
                arrays[field.name] = pa.array(value, field.type, from_pandas=True)
            else:
                arrays[field.name] = pa.array(value, field.type)
    return pa.table(arrays).select(schema.names).cast(schema)


def _random_sides(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random 10-hex-digit sides, as the clients make them."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    raw = rng.integers(0, 256, size=(n, 5), dtype=np.uint8)
    hexed = np.empty((n, 10), dtype=np.uint8)
    hexed[:, 0::2], hexed[:, 1::2] = digits[raw >> 4], digits[raw & 15]
    return hexed.view("S10").ravel().astype(str)
