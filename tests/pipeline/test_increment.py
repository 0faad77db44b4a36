"""Planning a report run from the file listing: session files name their last day."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pigeonhole.pipeline import ExportConfig, export_usage, storage
from pigeonhole.pipeline.increment import plan_run

from .usage_db import add_mailbox, add_nameplate, create_usage_db

DAY1 = 1_795_000_000.0 - 1_795_000_000.0 % 86400  # 2026-11-18 00:00 UTC
APP = "lothar.com/wormhole/text-or-file-xfer"
NOV = {d: dt.date(2026, 11, d) for d in (18, 19, 25)}


def _dataset(tmp_path: Path) -> Path:
    """A mailbox (and its nameplate) from 23:59:50 on the 18th that lasts 30 s."""
    con = create_usage_db(tmp_path / "usage.sqlite")
    add_mailbox(con, APP, DAY1 + 86400 - 10, 5.0, 30.0, "happy")
    add_nameplate(con, APP, DAY1 + 86400 - 10, 5.0, 6.0, "happy")
    con.close()
    out = tmp_path / "data"
    export_usage(ExportConfig(db_path=tmp_path / "usage.sqlite", out_dir=out))
    return out


def _mailbox_file(root: Path) -> Path:
    (found,) = (root / "mailboxes").rglob("*.parquet")
    return found


def test_the_plan_reaches_the_day_a_session_ends(spark: Any, tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    plan = plan_run(spark, storage.qualify(spark, str(root)), [])
    assert (plan.first_day, plan.last_day) == (NOV[18], NOV[19])


def test_the_file_name_is_trusted_without_reading_the_file(spark: Any, tmp_path: Path) -> None:
    """A name saying the 25th moves the plan's end there although no row reaches it:
    proof that planning no longer reads session files that name their last day."""
    root = _dataset(tmp_path)
    named = _mailbox_file(root)
    named.rename(named.with_name(named.name.replace("until-2026-11-19", "until-2026-11-25")))
    plan = plan_run(spark, storage.qualify(spark, str(root)), [])
    assert plan.last_day == NOV[25]


def test_a_file_without_the_day_in_its_name_is_read(spark: Any, tmp_path: Path) -> None:
    """Files written before names carried the day (part-<first>-<last>.parquet) still
    plan right: their last day is found by reading them."""
    root = _dataset(tmp_path)
    named = _mailbox_file(root)
    named.rename(named.with_name(named.name.split("-until-")[0] + ".parquet"))
    plan = plan_run(spark, storage.qualify(spark, str(root)), [])
    assert (plan.first_day, plan.last_day) == (NOV[18], NOV[19])
    (entry,) = (f for f in plan.catalog if f.table == "mailboxes")
    assert entry.end_day == NOV[19]
