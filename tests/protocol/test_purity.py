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
