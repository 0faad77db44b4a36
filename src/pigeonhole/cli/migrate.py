"""`import-reference`: start from the reference server's databases (docs/switching.md)."""

from __future__ import annotations

from pathlib import Path

import click

from pigeonhole.migrate.importer import ImportRefused, import_reference


@click.command("import-reference")
@click.option(
    "--channel-db",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The reference's channel database (its --channel-db, default relay.sqlite); read-only.",
)
@click.option(
    "--usage-db",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The reference's usage database (its --usage-db), if it kept one; read-only.",
)
@click.option(
    "--transit-usage-db",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The reference transit relay's usage database (its --usage-db), if it kept one;"
    " read-only. Its records become the transit usage table.",
)
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The new Pigeonhole data directory (created; must not hold server state).",
)
def import_reference_command(
    channel_db: Path, usage_db: Path | None, transit_usage_db: Path | None, data_dir: Path
) -> None:
    """Import the reference's live channels and usage history into a new data directory.

    With --transit-usage-db the relay's history carries over too (docs/switching.md).
    Run it after the reference has stopped and before `pigeonhole serve` starts on the
    same port: clients that were waiting reconnect and finish. The reference's files
    are opened read-only and never changed; on any refusal nothing is written.
    """
    try:
        summary = import_reference(
            channel_db, usage_db, data_dir, transit_usage_db=transit_usage_db
        )
    except ImportRefused as err:
        raise click.ClickException(f"nothing imported: {err}") from err
    usage = f", usage v{summary.usage_version}" if summary.usage_version else ""
    click.echo(f"imported reference channel v{summary.channel_version}{usage} into {data_dir}")
    for table, count in summary.rows.items():
        click.echo(f"  {table}: {count}")
    for reason, count in summary.skipped.items():
        click.echo(f"  not carried over: {count} {reason}")
