"""What goes wrong in a store, for every backend: the server and the node catch these
without knowing which backend raised them."""

from __future__ import annotations


class StoreError(Exception):
    """A transaction failed and was rolled back."""


class Conflict(StoreError):
    """The batch collided with another node's: decide it again from fresh rows."""


class Refused(StoreError):
    """The database refused the batch's content (deciding it again would not help)."""


class DatabaseError(Exception):
    """The database cannot be created or has a version we do not know."""


class StoreHelperError(OSError):
    """The SQLite store helper could not make a batch durable (it said so, or it is gone)."""


class BackupError(Exception):
    """A backup was not written; the message says why (nothing was left behind)."""
