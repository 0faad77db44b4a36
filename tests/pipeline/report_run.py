"""What the session's report fixture (conftest.py) hands the report tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReportRun:
    """Two report runs over demo data: a first one, then an incremental one with new days."""

    data: Path
    out: Path
    first_output: str
    second_output: str
    #: OUTPUT/tables files (relative path -> mtime) just before the second run
    before_second: dict[str, float]
