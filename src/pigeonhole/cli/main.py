"""The `pigeonhole` command group; every option can also come from PIGEONHOLE_* variables."""

from __future__ import annotations

import click

from pigeonhole import __version__
from pigeonhole.cli.archive import archive
from pigeonhole.cli.serve import serve
from pigeonhole.cli.usage import demo_data, export_usage, report


@click.group(context_settings={"auto_envvar_prefix": "PIGEONHOLE", "show_default": True})
@click.version_option(__version__)
def cli() -> None:
    """Pigeonhole: a Magic Wormhole mailbox server."""


cli.add_command(serve)
cli.add_command(archive)
cli.add_command(export_usage)
cli.add_command(report)
cli.add_command(demo_data)


def main() -> None:
    cli()
