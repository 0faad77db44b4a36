"""The protocol core imports no I/O (design rule 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pigeonhole.protocol

FORBIDDEN = {"asyncio", "sqlite3", "aiohttp", "websockets", "socket", "pyspark", "time"}


def test_protocol_modules_import_no_io() -> None:
    """No module under protocol/ imports asyncio, sqlite3, aiohttp, sockets or time."""
    folder = Path(pigeonhole.protocol.__file__).parent
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"


PACKAGE = "pigeonhole.protocol"


def imported_modules(source: str, package: str = PACKAGE) -> set[str]:
    """Every module a module of `package` imports, at any level (TYPE_CHECKING blocks and
    function bodies included), relative imports made absolute."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] if node.level else [])
            base = ".".join(p for p in (base, node.module or "") if p)
            # `from pigeonhole import permissions` imports the package it names
            found.update(f"{base}.{alias.name}" for alias in node.names)
            if base != "pigeonhole":
                found.add(base)
    return found


def outside_imports(source: str) -> set[str]:
    """The Pigeonhole modules outside protocol/ that a protocol/ module imports."""
    return {
        name
        for name in imported_modules(source)
        if (name == "pigeonhole" or name.startswith("pigeonhole."))
        and name != PACKAGE
        and not name.startswith(PACKAGE + ".")
    }


def test_protocol_imports_no_other_pigeonhole_package() -> None:
    """protocol/ is the bottom layer: it names what it needs of others (the permission
    policy) as a typing.Protocol of its own, never by importing them, not even for types."""
    folder = Path(pigeonhole.protocol.__file__).parent
    modules = sorted(folder.glob("*.py"))
    assert {"session.py", "commands.py"} <= {path.name for path in modules}
    for path in modules:
        assert outside_imports(path.read_text()) == set(), path.name


def test_the_import_check_sees_every_kind_of_import() -> None:
    source = """
from typing import TYPE_CHECKING
from . import effects
from .session import Session
from pigeonhole.protocol.step import Step
if TYPE_CHECKING:
    from pigeonhole.permissions.policy import PermissionPolicy
def late():
    import pigeonhole.store.shared
    from ..server import app
    from pigeonhole import cli
"""
    assert outside_imports(source) == {
        "pigeonhole.permissions.policy",
        "pigeonhole.permissions.policy.PermissionPolicy",
        "pigeonhole.store.shared",
        "pigeonhole.server",
        "pigeonhole.server.app",
        "pigeonhole.cli",
    }
