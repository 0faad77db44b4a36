"""Each setting declared once: a config field's default, help and option in one place.

A dataclass field made with `setting(default, help, ...)` is an option of
`pigeonhole serve` (cli/options.py builds it): `--` and the field's name with dashes on
the command line (or `option=`), `PIGEONHOLE_SERVE_<FIELD NAME>` in the environment, the
option's name as a `--config` TOML key, and the field in `--check-config`'s output. The
option's type comes from the field's annotation (a `Literal` is a choice list, a tuple a
repeatable option, a `bool` a flag, with a `--no-` side when its default is on); `min`
and `max` bound numbers. A plain field is not an option (tests and the code set it).

Pure, and in protocol/ (which imports no other package), so the protocol's own `Limits`
declares its settings the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

T = TypeVar("T")

#: what a number counts, for the README's option table (`4 MiB`, `660 s`)
Unit = Literal["bytes", "seconds"]
#: the key under which a field's metadata holds its Setting
SETTING = "pigeonhole.setting"


@dataclass(frozen=True)
class Setting:
    """How a config field is offered as an option (its default is the field's)."""

    help: str
    #: the option's name when it is not the field's, e.g. `trusted-proxy`
    option: str | None = None
    #: bounds of a number, inclusive
    min: float | None = None
    max: float | None = None
    metavar: str | None = None
    #: a path option names a file or a directory
    path: Literal["file", "dir"] | None = None
    #: a tuple given as one value, its items split here (`none,hashcash`)
    separator: str | None = None
    unit: Unit | None = None
    #: a running server keeps its value across a reload (SIGHUP): what it sets up once
    #: (listeners, the store, files opened) takes a restart; every other setting applies
    #: to what comes next as soon as it is reloaded
    restart: bool = False


def setting(
    default: T,
    help: str,
    *,
    option: str | None = None,
    min: float | None = None,
    max: float | None = None,
    metavar: str | None = None,
    path: Literal["file", "dir"] | None = None,
    separator: str | None = None,
    unit: Unit | None = None,
    restart: bool = False,
) -> T:
    """A dataclass field with this default that is also an option (see the module)."""
    declared = Setting(help, option, min, max, metavar, path, separator, unit, restart)
    found: T = field(default=default, metadata={SETTING: declared})
    return found


def declared(metadata: Any) -> Setting | None:
    """The Setting of a field's metadata, None for a field that is not an option."""
    found = metadata.get(SETTING)
    return found if isinstance(found, Setting) else None
