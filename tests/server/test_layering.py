"""The package layering of docs/architecture.md ("The dependency rule"), checked on the code.

Every module's imports of Pigeonhole, at any level (TYPE_CHECKING blocks and function
bodies included, relative imports resolved), must name only the packages its package's
row allows. The table here and the one in the doc must say the same; a new package needs
a row in both.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "pigeonhole"
DOC = ROOT / "docs" / "architecture.md"

#: the top-level `pigeonhole` package itself (the version): anyone may import it
TOP = "pigeonhole"
ANY = frozenset({"*"})

#: package (or top-level module) -> the packages it may import, besides itself and TOP
MAY_IMPORT: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "permissions": frozenset({"protocol"}),
    "durable": frozenset(),
    "clients": frozenset(),
    "config": frozenset({"protocol", "clients", "archive", "transit"}),
    "store": frozenset({"protocol"}),
    "archive": frozenset({"durable", "clients"}),
    "transit": frozenset(),
    "web": frozenset(),
    "migrate": frozenset({"store", "durable"}),
    "pipeline": frozenset({"migrate", "durable"}),
    "server": frozenset(
        {"protocol", "permissions", "store", "archive", "transit", "web", "config", "clients"}
    ),
    "cli": ANY,
    "__main__": frozenset({"cli"}),
}


def package_of(module: str, source: Path) -> str:
    """`pigeonhole.store.sqlite` -> `store`; `pigeonhole.__version__` -> TOP."""
    parts = module.split(".")
    if parts[0] != TOP:
        return ""
    if len(parts) == 1:
        return TOP
    name = parts[1]
    if (source / name).is_dir() or (source / f"{name}.py").is_file():
        return name
    return TOP


def module_name(path: Path, source: Path) -> str:
    relative = path.relative_to(source).with_suffix("")
    parts = [TOP, *relative.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, source: Path) -> set[str]:
    """Every module `path` imports, anywhere in it, as an absolute dotted name."""
    here = module_name(path, source).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            # `from pigeonhole import pipeline` imports the package, not a name
            found.update(f"{stem}.{alias.name}" for alias in node.names)
    return found


def packages_in(source: Path) -> set[str]:
    return {package_of(module_name(p, source), source) for p in source.rglob("*.py")} - {TOP}


def forbidden_imports(source: Path, rule: dict[str, frozenset[str]]) -> list[str]:
    """Lines `module -> imported (package -> package)` for each import the rule forbids."""
    found: list[str] = []
    for path in sorted(source.rglob("*.py")):
        importer = module_name(path, source)
        own = package_of(importer, source)
        allowed = rule.get(own, frozenset())
        for imported in sorted(imported_modules(path, source)):
            target = package_of(imported, source)
            if target in ("", TOP, own) or allowed == ANY or target in allowed:
                continue
            found.append(f"{importer} -> {imported} ({own} -> {target})")
    return found


def doc_table() -> dict[str, frozenset[str]]:
    """The rows of the doc's table under "The dependency rule"."""
    section = DOC.read_text().split("## The dependency rule", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and (name := re.fullmatch(r"`([\w]+)`", cells[0])):
            names = frozenset(re.findall(r"`(\w+)`", cells[1]))
            rows[name.group(1)] = ANY if cells[1] == "any package" else names
    return rows


def test_every_package_has_a_row_in_the_layering_table() -> None:
    assert packages_in(SOURCE) == MAY_IMPORT.keys()


def test_packages_import_only_the_layers_their_row_allows() -> None:
    assert forbidden_imports(SOURCE, MAY_IMPORT) == []


def test_the_layering_table_is_the_one_in_architecture_md() -> None:
    assert doc_table() == MAY_IMPORT


def test_the_layering_check_finds_imports_at_any_level(tmp_path: Path) -> None:
    source = tmp_path / "pigeonhole"
    (source / "protocol").mkdir(parents=True)
    (source / "server").mkdir()
    (source / "__init__.py").write_text("__version__ = '1'\n")
    (source / "server" / "__init__.py").write_text("")
    (source / "server" / "app.py").write_text("from pigeonhole import __version__\n")
    (source / "protocol" / "__init__.py").write_text("")
    (source / "protocol" / "core.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import __name__ as own\n"
        "if TYPE_CHECKING:\n"
        "    from pigeonhole.server.app import X\n"
        "def later() -> None:\n"
        "    import pigeonhole.server\n"
        "    from .. import server\n"
    )
    rule = {"protocol": frozenset(), "server": frozenset({"protocol"})}
    assert forbidden_imports(source, rule) == [
        "pigeonhole.protocol.core -> pigeonhole.server (protocol -> server)",
        "pigeonhole.protocol.core -> pigeonhole.server.app.X (protocol -> server)",
    ]
    assert packages_in(source) == {"protocol", "server"}
