"""The store is laid out by backend: what goes wrong is in one place for every backend.

A module outside a backend (the server, the node, the command line, the importer) catches
store errors from store/errors.py, never from a backend's module, so it need not know
which backend raised one; and no backend defines an error type of its own.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
STORE = SRC / "pigeonhole" / "store"
BACKENDS = ("pigeonhole.store.sqlite", "pigeonhole.store.postgres")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _backend_of(module: str) -> str | None:
    return next((b for b in BACKENDS if module == b or module.startswith(b + ".")), None)


def errors_taken_from_a_backend() -> list[str]:
    """`module: name` for each exception class a module imports from another backend."""
    found = []
    for path in sorted((SRC / "pigeonhole").rglob("*.py")):
        here = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            backend = _backend_of(node.module)
            if backend is None or _backend_of(here) == backend:
                continue
            source = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(source, alias.name, None)
                if isinstance(value, type) and issubclass(value, BaseException):
                    found.append(f"{here}: {alias.name}")
    return found


def test_no_module_takes_an_error_type_from_a_backend() -> None:
    assert errors_taken_from_a_backend() == []


def test_every_store_error_is_defined_in_errors_py() -> None:
    defined = []
    for path in sorted(STORE.rglob("*.py")):
        module = importlib.import_module(_module_name(path))
        for name, value in vars(module).items():
            is_error = isinstance(value, type) and issubclass(value, BaseException)
            if is_error and value.__module__ == module.__name__:
                defined.append(f"{module.__name__}.{name}")
    errors = importlib.import_module("pigeonhole.store.errors")
    assert defined and all(d.startswith(errors.__name__ + ".") for d in defined), defined


def test_the_schema_files_live_with_their_backend() -> None:
    assert sorted(p.name for p in (STORE / "sqlite" / "schema").glob("*.sql")) == [
        "channel-upgrade-v1-v2.sql",
        "channel-upgrade-v2-v3.sql",
        "channel-v1.sql",
        "channel-v2.sql",
        "channel-v3.sql",
        "usage-upgrade-v1-v2.sql",
        "usage-v1.sql",
        "usage-v2.sql",
    ]
    assert sorted(p.name for p in (STORE / "postgres" / "schema").glob("*.sql")) == [
        "postgres-upgrade-v1-v2.sql",
        "postgres-upgrade-v10-v11.sql",
        "postgres-upgrade-v2-v3.sql",
        "postgres-upgrade-v3-v4.sql",
        "postgres-upgrade-v4-v5.sql",
        "postgres-upgrade-v5-v6.sql",
        "postgres-upgrade-v6-v7.sql",
        "postgres-upgrade-v7-v8.sql",
        "postgres-upgrade-v8-v9.sql",
        "postgres-upgrade-v9-v10.sql",
        "postgres-v1.sql",
    ]
    assert not (STORE / "schema").exists()
