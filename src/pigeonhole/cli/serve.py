"""`pigeonhole serve`: options -> ServerConfig -> the server, until SIGTERM/SIGINT; on
SIGHUP the options are read again the same way (cli/reload.py).

The options are made from ServerConfig's declarations (cli/options.py); only
`--config` and `--check-config` belong to the command itself.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from pigeonhole.cli.config_file import config_option
from pigeonhole.cli.logs import setup_logging
from pigeonhole.cli.options import build, setting_options
from pigeonhole.cli.reload import ConfigReader, RecordingCommand
from pigeonhole.config import ServerConfig
from pigeonhole.server.rules import RuleError
from pigeonhole.server.run import run
from pigeonhole.store.errors import StoreError

#: `PIGEONHOLE_SERVE_<NAME>`: the group's PIGEONHOLE prefix and this command's name
ENV_PREFIX = "PIGEONHOLE_SERVE"


@click.command(cls=RecordingCommand)
@config_option
@setting_options(ServerConfig, ENV_PREFIX)
@click.option(
    "--check-config",
    is_flag=True,
    help="Print the settings as resolved (command line, environment, --config file) and exit.",
)
def serve(check_config: bool, **values: Any) -> None:
    """Run the mailbox server (WebSocket at ws://HOST:PORT/v1)."""
    config = build(ServerConfig, values)
    refuse_contradictions(config)
    setup_logging(config.log_format, config.log_level)
    if check_config:
        click.echo(json.dumps(settings(config), indent=2))
        return
    reader = ConfigReader.of(click.get_current_context(), refuse_contradictions)
    try:
        run(config, reader.read)
    except (StoreError, RuleError) as err:
        raise click.ClickException(str(err)) from err


def settings(config: ServerConfig) -> dict[str, Any]:
    """The resolved configuration as JSON values (paths as strings)."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))  # type: ignore[no-any-return]


def refuse_contradictions(config: ServerConfig) -> None:
    """What no single option's type can check: the store's scheme, TLS files in pairs."""
    if config.store is not None and not config.store.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter("a postgresql:// URL", param_hint="--store")
    if (config.tls_cert is None) != (config.tls_key is None):
        raise click.BadParameter("give both --tls-cert and --tls-key", param_hint="--tls-cert")
