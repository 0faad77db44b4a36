"""Permission to use the server, as the server protocol defines it: pure checks."""

from __future__ import annotations

from pigeonhole.permissions.hashcash import mint_stamp, verify_stamp
from pigeonhole.permissions.policy import PermissionPolicy

__all__ = ["PermissionPolicy", "mint_stamp", "verify_stamp"]
