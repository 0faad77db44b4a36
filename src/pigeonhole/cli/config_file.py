"""`--config FILE`: option values from a TOML file, under the command line and environment.

The file's keys are the options' own names without the dashes (`port = 4000`,
`trusted-proxy = ["10.0.0.0/8"]`, `disallow-list = true`, `archive = false`); an
underscore may stand for a dash. The values become the command's `default_map`, which
click consults after the command line and the PIGEONHOLE_* environment variables, so the
precedence is command line, then environment, then file, then the built-in default.
Unknown keys are refused by name: a typo must not be silently ignored.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: `ctx.meta` keys: the file read, and option name -> the key that set it there (so an
#: error in a value can name its line, cli/reload.py)
FILE_PATH = "pigeonhole.config_file"
FILE_KEYS = "pigeonhole.config_keys"


def _options(command: click.Command) -> dict[str, tuple[click.Option, bool]]:
    """Option name (no dashes) -> (option, whether the name is the `--no-` side of a flag)."""
    names: dict[str, tuple[click.Option, bool]] = {}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name == "config":
            continue
        for opt in param.opts:
            names[opt.lstrip("-")] = (param, False)
        for opt in param.secondary_opts:
            names[opt.lstrip("-")] = (param, True)
    return names


def load_config(ctx: click.Context, param: click.Parameter, path: Path | None) -> None:
    if path is None:
        return
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise click.BadParameter(f"{path}: {err}", ctx, param) from err
    known = _options(ctx.command)
    defaults: dict[str, Any] = {}
    keys: dict[str, str] = ctx.meta.setdefault(FILE_KEYS, {})
    ctx.meta[FILE_PATH] = path
    for key, value in data.items():
        found = known.get(key) or known.get(key.replace("_", "-"))
        if found is None:
            raise click.BadParameter(f"{path}: no option named {key!r}", ctx, param)
        option, negated = found
        if negated:
            if not isinstance(value, bool):
                raise click.BadParameter(f"{path}: {key} must be true or false", ctx, param)
            value = not value
        if option.multiple and not isinstance(value, list):
            value = [value]
        if isinstance(value, dict):
            raise click.BadParameter(f"{path}: {key} must be a value, not a table", ctx, param)
        assert option.name is not None
        defaults[option.name] = value
        keys[option.name] = key
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


def config_option(command: F) -> F:
    """Decorate a command with `--config FILE` (processed before every other option)."""
    return click.option(
        "--config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        is_eager=True,
        expose_value=False,
        callback=load_config,
        help="TOML file of option values, named as the options (port = 4000); the command"
        " line and PIGEONHOLE_* variables override it.",
    )(command)
