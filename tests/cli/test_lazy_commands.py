"""The server's command line does not load the pipeline's heavy libraries."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from pigeonhole.cli.main import cli


def test_serve_does_not_import_pyarrow_or_spark() -> None:
    code = (
        "import sys, pigeonhole.cli.main;"
        "print(sorted(m for m in ('pyarrow', 'numpy', 'pandas', 'pyspark') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_pipeline_commands_are_listed_and_load_on_use() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("serve", "archive", "export-usage", "report", "demo-data"):
        assert name in result.output
    result = CliRunner().invoke(cli, ["demo-data", "--help"])
    assert result.exit_code == 0 and "--transfers" in result.output
