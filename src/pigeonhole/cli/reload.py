"""The settings read again as at start: what a reload (SIGHUP) of `serve` is given.

`serve` records the arguments it was started with (`RecordingCommand`); `ConfigReader`
parses them again with the same command, so the `--config` file is read anew and the
precedence is start-up's own: command line, then the PIGEONHOLE_SERVE_* environment
(the process's, as it was at start: a service manager's environment changes need a
restart), then the file, then the defaults. A file that does not parse, an unknown key or
a value out of bounds is a `ConfigError` whose message names the file and, for a value,
the line that set it; nothing is half-applied because nothing is applied here at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from pigeonhole.cli.config_file import FILE_KEYS, FILE_PATH
from pigeonhole.cli.options import build
from pigeonhole.config import ServerConfig
from pigeonhole.server.reloader import ReloadError

#: `ctx.meta` key of the arguments the command was parsed from
ARGUMENTS = "pigeonhole.arguments"


class ConfigError(ReloadError):
    """Settings that cannot be used; the message says what and where."""


class RecordingCommand(click.Command):
    """A command that keeps the arguments it is parsed from, to parse them again."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[ARGUMENTS] = list(args)
        return super().parse_args(ctx, args)


class ConfigReader:
    """Read `command`'s settings again from `arguments`, as they were read at start."""

    def __init__(
        self,
        command: click.Command,
        arguments: Sequence[str],
        check: Callable[[ServerConfig], None] = lambda config: None,
        env_prefix: str | None = None,
    ) -> None:
        self.command = command
        self.arguments = list(arguments)
        #: what start-up refuses beyond single values (click.BadParameter)
        self.check = check
        self.env_prefix = env_prefix

    @classmethod
    def of(
        cls, ctx: click.Context, check: Callable[[ServerConfig], None] = lambda c: None
    ) -> ConfigReader:
        """The reader of the running command's context (its command was a RecordingCommand)."""
        return cls(ctx.command, ctx.meta[ARGUMENTS], check, ctx.auto_envvar_prefix)

    def read(self) -> ServerConfig:
        """The settings now; ConfigError when they cannot be used."""
        try:
            ctx = self.command.make_context(
                self.command.name,
                list(self.arguments),
                auto_envvar_prefix=self.env_prefix,
                resilient_parsing=False,
            )
            with ctx:
                config = build(ServerConfig, dict(ctx.params))
                self.check(config)
        except click.ClickException as err:
            raise ConfigError(_explained(err)) from None
        return config


def _explained(err: click.ClickException) -> str:
    """click's message, with the `--config` line that set a refused value when it did."""
    message = err.format_message()
    ctx = getattr(err, "ctx", None)
    param = getattr(err, "param", None)
    if ctx is None or param is None or param.name is None:
        return message
    if ctx.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT_MAP:
        return message
    path = ctx.meta.get(FILE_PATH)
    key = ctx.meta.get(FILE_KEYS, {}).get(param.name)
    if not isinstance(path, Path) or key is None:
        return message
    found = line_of(path, key)
    if found is None:
        return f"{path}: {key}: {message}"
    number, text = found
    return f"{path}:{number}: {text.strip()!r}: {message}"


def line_of(path: Path, key: str) -> tuple[int, str] | None:
    """(line number, line) of the top-level TOML line that sets `key`, if one is found."""
    pattern = re.compile(r"""\s*(?:"|')?""" + re.escape(key) + r"""(?:"|')?\s*=""")
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for number, line in enumerate(lines, start=1):
        if pattern.match(line):
            return number, line
    return None
