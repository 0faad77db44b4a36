"""The `pigeonhole` command group; every option can also come from PIGEONHOLE_* variables.

The usage pipeline's commands are loaded only when called: they import pyarrow (and
PySpark for `report`), which `serve` must not pay for in start-up time or memory.
"""

from __future__ import annotations

import importlib

import click

from pigeonhole import __version__
from pigeonhole.cli.archive import archive
from pigeonhole.cli.serve import serve

#: command name -> "module:attribute", imported on first use
LAZY_COMMANDS = {
    "export-usage": "pigeonhole.cli.usage:export_usage",
    "report": "pigeonhole.cli.usage:report",
    "demo-data": "pigeonhole.cli.usage:demo_data",
    "import-reference": "pigeonhole.cli.migrate:import_reference_command",
    "backup": "pigeonhole.cli.backup:backup_command",
}


class LazyGroup(click.Group):
    """A group whose listed commands in LAZY_COMMANDS are imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"auto_envvar_prefix": "PIGEONHOLE", "show_default": True},
)
@click.version_option(__version__)
def cli() -> None:
    """Pigeonhole: a Magic Wormhole mailbox server."""


cli.add_command(serve)
cli.add_command(archive)


def main() -> None:
    cli()
