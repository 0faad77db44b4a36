"""Fixtures of the migration tests: the reference server (reference_support.py), and the
WebSocket client of the server tests (tests/server, put on sys.path here)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from migrate_support import reference

__all__ = ["reference"]
