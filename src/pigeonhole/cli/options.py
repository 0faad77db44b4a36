"""Click options made from the config's declared settings, and the config made from them.

A field declared with `setting` (pigeonhole/settings.py) becomes one option; a field whose
type is itself a dataclass of settings (`ServerConfig.limits`) lends its fields' options,
in declaration order, and is rebuilt from their values. The `--config` file's keys follow
from the options (cli/config_file.py), so nothing here names a setting.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import click

from pigeonhole.protocol.settings import Setting, declared

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C")

if TYPE_CHECKING:  # generic for the type checker; click before 8.2 is not at run time
    _ParamType = click.ParamType[tuple[str, ...]]
else:
    _ParamType = click.ParamType


@dataclasses.dataclass(frozen=True)
class Declared:
    """One declared setting: its field's name, type and default, and how it is offered."""

    name: str
    kind: Any
    default: Any
    setting: Setting

    @property
    def option(self) -> str:
        return "--" + (self.setting.option or self.name.replace("_", "-"))


def declarations(config_type: type[Any]) -> Iterator[Declared]:
    """Every declared setting of a config class, nested ones where their field stands."""
    hints = typing.get_type_hints(config_type)
    for item in dataclasses.fields(config_type):
        found = declared(item.metadata)
        if found is not None:
            yield Declared(item.name, hints[item.name], item.default, found)
        elif dataclasses.is_dataclass(hints[item.name]):
            yield from declarations(hints[item.name])


def build(config_type: type[C], values: dict[str, Any]) -> C:
    """The config of these option values (nested configs built from their own)."""
    hints = typing.get_type_hints(config_type)
    given: dict[str, Any] = {}
    for item in dataclasses.fields(cast(Any, config_type)):
        if declared(item.metadata) is not None:
            given[item.name] = values[item.name]
        elif dataclasses.is_dataclass(hints[item.name]):
            given[item.name] = build(hints[item.name], values)
    return config_type(**given)


def setting_options(config_type: type[Any], env_prefix: str) -> Callable[[F], F]:
    """Decorate a command with an option per declared setting, in declaration order."""

    items = list(declarations(config_type))
    names = [item.name for item in items]
    assert len(set(names)) == len(names), "a nested setting shares its name with another"

    def decorate(command: F) -> F:
        for item in reversed(items):
            command = _option(item, env_prefix)(command)
        return command

    return decorate


def _option(item: Declared, env_prefix: str) -> Callable[[F], F]:
    """A bool is a flag (with a `--no-` side when it is on by default), a tuple repeatable."""
    names = [item.option]
    shape: dict[str, Any] = {"is_flag": True}
    if item.kind is bool and item.default:
        names, shape = [f"{item.option}/--no-{item.option[2:]}"], {}
    elif item.kind is not bool:
        repeated = _is_tuple(item.kind) and item.setting.separator is None
        shape = {"type": _param_type(item), "multiple": repeated}
    return click.option(
        *names,
        item.name,
        default=item.default,
        show_default=True,
        metavar=item.setting.metavar,
        envvar=f"{env_prefix}_{item.name.upper()}",
        help=item.setting.help,
        **shape,
    )


def _param_type(item: Declared) -> click.ParamType[Any]:
    kind = _without_none(item.kind)
    setting = item.setting
    if _is_tuple(kind):
        element = typing.get_args(kind)[0]
        if setting.separator is not None:
            return SeparatedChoice(_choices(element), setting.separator)
        kind = element
    if typing.get_origin(kind) is Literal:
        return click.Choice(_choices(kind))
    if kind is Path:
        return click.Path(
            file_okay=setting.path != "dir", dir_okay=setting.path != "file", path_type=Path
        )
    return _scalar_type(kind, setting)


def _scalar_type(kind: Any, setting: Setting) -> click.ParamType[Any]:
    bounded = setting.min is not None or setting.max is not None
    if kind is int:
        low, high = (None if b is None else int(b) for b in (setting.min, setting.max))
        return click.IntRange(low, high) if bounded else click.INT
    if kind is float:
        return click.FloatRange(setting.min, setting.max) if bounded else click.FLOAT
    assert kind is str and not bounded, kind
    return click.STRING


def _is_tuple(kind: Any) -> bool:
    return typing.get_origin(kind) is tuple


def _without_none(kind: Any) -> Any:
    """`X | None` -> X (an unset option's default is None)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        (kind,) = (arg for arg in typing.get_args(kind) if arg is not type(None))
    return kind


def _choices(kind: Any) -> tuple[str, ...]:
    assert typing.get_origin(kind) is Literal, kind
    return tuple(str(choice) for choice in typing.get_args(kind))


class SeparatedChoice(_ParamType):
    """Several of the choices given as one value, `none,hashcash`: a tuple of them."""

    name = "text"

    def __init__(self, choices: tuple[str, ...], separator: str) -> None:
        self.choices = choices
        self.separator = separator

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        items = value if isinstance(value, tuple | list) else str(value).split(self.separator)
        picked = tuple(str(item).strip() for item in items if str(item).strip())
        if not picked or not set(picked) <= set(self.choices):
            shown = ", ".join(self.choices)
            self.fail(f"use one or more of {shown}, separated by {self.separator!r}", param, ctx)
        return picked
