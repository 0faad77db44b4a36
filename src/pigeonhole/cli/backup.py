"""`backup`: a consistent copy of a data directory's databases while the server serves."""

from __future__ import annotations

from pathlib import Path

import click

from pigeonhole.config import ServerConfig
from pigeonhole.store.backup import backup
from pigeonhole.store.errors import BackupError


@click.command("backup")
@click.option(
    "--data-dir",
    default=ServerConfig().data_dir,
    type=click.Path(file_okay=False, path_type=Path),
    help="The server's --data-dir (it may be serving).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="A new directory for the backup (refused if it exists).",
)
def backup_command(data_dir: Path, out: Path) -> None:
    """Copy every SQLite database of --data-dir into the new directory --out.

    SQLite's online backup: a consistent copy while the server serves, never a file copy.
    `--out` appears whole or not at all. `pigeonhole serve --data-dir OUT` resumes from it,
    waiting clients included. On PostgreSQL (--store) use pg_dump (docs/operations.md).
    """
    try:
        copied = backup(data_dir, out)
    except BackupError as err:
        raise click.ClickException(str(err)) from err
    for item in copied:
        click.echo(f"  {item.name}: {item.bytes} bytes")
    click.echo(f"backup of {data_dir} written to {out}")
