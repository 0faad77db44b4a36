"""Pigeonhole: a fast, durable Magic Wormhole mailbox server."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    #: the one source of the version is pyproject.toml, as the installed package records it
    __version__ = version("pigeonhole")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
__all__ = ["__version__"]
