"""Which days a report run must recompute, and which input files it must read for them.

The report keeps a catalog of the input files it has seen (OUTPUT/_state/input_files):
for each file its table, its partition day and the last day any of its sessions reached.
Export files are immutable, so a file not in the catalog is new data. A run recomputes
the contiguous range of days from the earliest new file's day to the latest day its
sessions reached, and reads only the files that can touch that range: session files that
started on or before its last day and lasted into its first day, and the other tables'
files of those days. A daily run therefore reads about two days, however long the history.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pigeonhole.pipeline import storage
from pigeonhole.pipeline.extract import read_table
from pigeonhole.pipeline.periods import DAY_US

SESSION_TABLES = ("mailboxes", "nameplates", "transit")
OTHER_TABLES = ("client_versions", "connection_counts")
_DAY = re.compile(r"(?:^|/)day=(\d{4}-\d{2}-\d{2})/")
#: a session file's name carries the last day its sessions reach (dataset.py)
_UNTIL = re.compile(r"-until-(\d{4}-\d{2}-\d{2})\.parquet$")


class InputFile(NamedTuple):
    """One input file: `path` relative to the input root, e.g. `mailboxes/day=.../part-..`."""

    table: str
    path: str
    day: dt.date
    #: the last day any row of the file reaches (a session's end; the day itself otherwise)
    end_day: dt.date


@dataclass(frozen=True)
class Plan:
    """The days to recompute (inclusive; None when nothing is new) and the files to read."""

    first_day: dt.date | None
    last_day: dt.date | None
    reads: Mapping[str, tuple[str, ...]]
    catalog: tuple[InputFile, ...]
    new_files: int


def file_day(path: str) -> dt.date:
    """The partition day in a dataset path."""
    found = _DAY.search(path)
    if found is None:
        raise ValueError(f"not a day partition: {path}")
    return dt.date.fromisoformat(found.group(1))


def plan_run(
    spark: SparkSession, input_root: str, known: Iterable[tuple[str, str, dt.date, dt.date]]
) -> Plan:
    """Compare the input files with the catalog `known` (`InputFile` rows) and plan the run."""
    # one listing job for the whole dataset (not one per table)
    everything = _relative(input_root, storage.list_files(spark, input_root))
    listed = {
        t: [p for p in everything if p.startswith(t + "/")]
        for t in (*SESSION_TABLES, *OTHER_TABLES)
    }
    present = {p for paths in listed.values() for p in paths}
    catalog = {f.path: f for f in map(InputFile._make, known) if f.path in present}
    new = [p for paths in listed.values() for p in paths if p not in catalog]
    catalog.update({f.path: f for f in _describe(spark, input_root, new)})
    if not new:
        return Plan(None, None, {}, tuple(catalog.values()), 0)
    first = min(catalog[p].day for p in new)
    last = max(catalog[p].end_day for p in new)
    reads = {
        table: tuple(
            storage.join(input_root, f.path)
            for f in catalog.values()
            if f.table == table and f.day <= last and f.end_day >= first
        )
        for table in listed
    }
    return Plan(first, last, reads, tuple(catalog.values()), len(new))


def _relative(root: str, uris: Iterable[str]) -> list[str]:
    return [uri[len(root) :].lstrip("/") for uri in uris]


def _describe(spark: SparkSession, root: str, paths: list[str]) -> list[InputFile]:
    """Catalog entries for new files; only session files whose name does not say their
    last day (an older exporter's names) are read to find it."""
    ends = {p: dt.date.fromisoformat(m.group(1)) for p in paths if (m := _UNTIL.search(p))}
    unnamed = [p for p in paths if p.startswith(SESSION_TABLES) and p not in ends]
    ends.update(_session_ends(spark, root, unnamed))
    found = []
    for table in (*SESSION_TABLES, *OTHER_TABLES):
        for path in (p for p in paths if p.startswith(table + "/")):
            day = file_day(path)
            found.append(InputFile(table, path, day, max(day, ends.get(path, day))))
    return found


def _session_ends(spark: SparkSession, root: str, paths: list[str]) -> dict[str, dt.date]:
    """(table/day=.../file name) -> the last day a session of that file reached.

    One job for the files of every session table (their rows read as a union).
    """
    parts: list[DataFrame] = []
    for table in SESSION_TABLES:
        mine = [storage.join(root, p) for p in paths if p.startswith(table + "/")]
        if mine:
            rows = read_table(spark, root, table, mine)
            end = F.unix_micros("started") + F.floor(F.col("total_time") * 1_000_000)
            name = F.element_at(F.split(F.input_file_name(), "/"), -1)
            parts.append(
                rows.groupBy("day", name.alias("name"))
                .agg(F.max(end).alias("end_us"))
                .select(F.lit(table).alias("table"), "day", "name", "end_us")
            )
    if not parts:
        return {}
    ends = reduce(DataFrame.unionByName, parts).collect()
    epoch = dt.date(1970, 1, 1)
    return {
        f"{r['table']}/day={r['day'].isoformat()}/{r['name']}": epoch
        + dt.timedelta(days=int(r["end_us"]) // DAY_US)
        for r in ends
    }
