"""Pigeonhole: a fast, durable Magic Wormhole mailbox server."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
