"""docs/pipeline.md documents every output table and input table, column by column."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the output schemas are Spark types")

from pigeonhole.pipeline.dataset import CURRENT_SCHEMA, SCHEMAS
from pigeonhole.pipeline.schema import TABLES

DOC = (Path(__file__).parents[2] / "docs" / "pipeline.md").read_text()


def _section(heading: str) -> str:
    start = DOC.index(heading)
    following = re.search(r"\n#{2,4} ", DOC[start + len(heading) :])
    return DOC[start : start + len(heading) + (following.start() if following else len(DOC))]


@pytest.mark.parametrize("name", list(TABLES))
def test_every_output_column_is_documented(name: str) -> None:
    """tables/NAME/ has a section listing each column with its type and its doc."""
    section = _section(f"### `tables/{name}/`")
    for field in TABLES[name].fields:
        line = f"| `{field.name}` | {field.dataType.simpleString()} | {field.metadata['doc']} |"
        assert line in section, line


@pytest.mark.parametrize("name", [*SCHEMAS, "current"])
def test_every_input_column_is_documented(name: str) -> None:
    """The dataset's tables are listed with each column's Arrow type."""
    section = _section(f"#### `{name}`")
    schema = CURRENT_SCHEMA if name == "current" else SCHEMAS[name]
    for field in schema:
        assert f"| `{field.name}` | {field.type} |" in section, field.name
