"""The README's option table says what the declarations in config.py say.

Every declared option has a row (a row may name several, their defaults separated by
", ", or one default for all of them), with its default as the table writes it: `none`,
`on`/`off`, bytes in the largest whole KiB/MiB/GiB, seconds as `N s`, a list as its items;
no row, and no option mentioned in a row, names an option that does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

from pigeonhole.cli.options import Declared, declarations
from pigeonhole.config import ServerConfig

README = Path(__file__).resolve().parents[2] / "README.md"
DECLARED = {item.option: item for item in declarations(ServerConfig)}
UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def shown_name(item: Declared) -> str:
    """`--archive/--no-archive` for a flag that is on by default, else the option."""
    if item.kind is bool and item.default:
        return f"{item.option}/--no-{item.option[2:]}"
    return item.option


def shown_default(item: Declared) -> str:
    value = item.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ", ".join(value)
    if item.setting.unit == "bytes":
        return next((f"{value // size} {unit}" for unit, size in UNITS if value % size == 0), "")
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text} s" if item.setting.unit == "seconds" else text


def table(readme: str) -> list[list[str]]:
    """The cells of each row of the Options section's table (no header rows)."""
    section = readme.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]


def disagreements(readme: str) -> list[str]:
    """What the README's table and the declarations disagree on (nothing: agreement)."""
    found: list[str] = []
    listed: list[str] = []
    by_name = {shown_name(item): item for item in DECLARED.values()}
    for first, defaults, meaning in table(readme):
        names = [part.split()[0].strip("`") for part in first.split(", ")]
        listed += names
        shown = defaults.replace("`", "")
        values = [shown] if len(names) == 1 else shown.split(", ")
        if len(values) == 1:
            values *= len(names)  # one default for every option of the row
        if len(values) != len(names):
            found.append(f"{first}: {len(values)} defaults for {len(names)} options")
        for name, value in zip(names, values, strict=False):
            if name not in by_name:
                found.append(f"{name}: in the table, not an option")
            elif value != shown_default(by_name[name]):
                found.append(f"{name}: table {value!r}, declared {shown_default(by_name[name])!r}")
        for mention in re.findall(r"`(--[a-z0-9-]+)", meaning):
            if mention not in DECLARED:
                found.append(f"{mention}: mentioned in the table, not an option")
    found += [f"{name}: not in the table" for name in by_name if name not in listed]
    found += [f"{name}: in the table twice" for name in set(listed) if listed.count(name) > 1]
    return found


def test_the_readme_table_and_the_declarations_agree() -> None:
    readme = README.read_text()
    assert disagreements(readme) == []
    assert len(table(readme)) > 30
    assert len(DECLARED) > 50  # every option of `serve`, the nested limits' too


def test_a_table_that_strays_is_caught() -> None:
    """A changed default, an option gone from the table, one that does not exist."""
    readme = README.read_text()
    changed = readme.replace("| `--max-creations` | 4 |", "| `--max-creations` | 5 |")
    assert disagreements(changed) == ["--max-creations: table '5', declared '4'"]
    gone = re.sub(r"\n\| `--node-lanes` \|[^\n]*", "", readme)
    assert disagreements(gone) == ["--node-lanes: not in the table"]
    extra = readme.replace("| `--max-creations` |", "| `--max-creation` |")
    assert disagreements(extra) == [
        "--max-creation: in the table, not an option",
        "--max-creations: not in the table",
    ]
    mentioned = readme.replace("above the threshold", "above `--hashcash-threshold`")
    assert disagreements(mentioned) == [
        "--hashcash-threshold: mentioned in the table, not an option"
    ]
