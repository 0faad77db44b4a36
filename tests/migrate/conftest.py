"""Fixtures of the migration tests: the reference server (migrate_support.py)."""

from tests.migrate.migrate_support import reference

__all__ = ["reference"]
