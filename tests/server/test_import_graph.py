"""server/ has no import cycle: every module's imports of other server modules, at any
level (TYPE_CHECKING blocks and function bodies included), form a graph without a loop.

The parts the server builds (connections, the metrics text, the status page, the admin
app) are written against the protocols of server/context.py, not against app.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "src" / "pigeonhole" / "server"
PACKAGE = "pigeonhole.server"


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PACKAGE + "."):
                found.add(node.module.split(".")[2])
            elif node.module == PACKAGE:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.split(".")[2])
    return found


def graph() -> dict[str, set[str]]:
    """Each module's imports of other server modules; a subpackage (node/) is one module."""
    modules = {p.stem: [p] for p in SERVER.glob("*.py") if p.stem != "__init__"}
    for package in SERVER.iterdir():
        if (package / "__init__.py").is_file():
            modules[package.name] = sorted(package.glob("*.py"))
    return {
        name: set().union(*(imports_of(path) for path in paths)) & (modules.keys() - {name})
        for name, paths in modules.items()
    }


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_server_modules_import_without_a_cycle() -> None:
    edges = graph()
    assert {"app", "connection", "websocket", "exposition", "status", "admin", "node"} <= (
        edges.keys()
    )
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
