"""What a reload changes: the settings that differ, and the config a running server takes.

Each setting says once, where it is declared, whether a running server can take a new
value (`setting(..., restart=True)` when it cannot: listeners, the store, files and
tasks set up at start). `changes` lists what differs between the running config and one
read again; `applicable` is the running config with every live change taken and every
restart-only one left as it is (the log says "needs a restart" for those). Fields that
are not options (set by tests and the code) are never taken from a reload.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from pigeonhole.config import ServerConfig
from pigeonhole.protocol.settings import declared

C = TypeVar("C")


@dataclass(frozen=True)
class Change:
    """One setting whose value differs: its field, option, values, and whether live."""

    name: str
    option: str
    old: Any
    new: Any
    restart: bool

    def __str__(self) -> str:
        return f"{self.option} {_shown(self.old)} -> {_shown(self.new)}"


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value) or "()"
    return "none" if value is None else str(value)


def changes(old: ServerConfig, new: ServerConfig) -> list[Change]:
    """Every declared setting whose value differs, in declaration order (nested ones too)."""
    return list(_changes(old, new))


def _changes(old: Any, new: Any) -> Any:
    for item in dataclasses.fields(old):
        before, after = getattr(old, item.name), getattr(new, item.name)
        found = declared(item.metadata)
        if found is not None:
            if before != after:
                option = "--" + (found.option or item.name.replace("_", "-"))
                yield Change(item.name, option, before, after, found.restart)
        elif dataclasses.is_dataclass(before) and not isinstance(before, type):
            yield from _changes(before, after)


def applicable(old: ServerConfig, new: ServerConfig) -> ServerConfig:
    """`old` with every live setting of `new` (restart-only ones and non-options kept)."""
    return _taken(old, new)


def _taken(old: C, new: C) -> C:
    taken: dict[str, Any] = {}
    for item in dataclasses.fields(old):  # type: ignore[arg-type]
        before, after = getattr(old, item.name), getattr(new, item.name)
        found = declared(item.metadata)
        if found is not None:
            if not found.restart and before != after:
                taken[item.name] = after
        elif dataclasses.is_dataclass(before) and before != after:
            taken[item.name] = _taken(before, after)
    return dataclasses.replace(old, **taken) if taken else old  # type: ignore[type-var]


def restart_only(config_type: type[Any] = ServerConfig) -> list[str]:
    """The options a reload cannot change, in declaration order (for the docs' list)."""
    found: list[str] = []
    hints = typing.get_type_hints(config_type)
    for item in dataclasses.fields(config_type):
        setting = declared(item.metadata)
        if setting is not None and setting.restart:
            found.append("--" + (setting.option or item.name.replace("_", "-")))
        elif setting is None and dataclasses.is_dataclass(hints[item.name]):
            found += restart_only(hints[item.name])
    return found


@dataclass(frozen=True)
class ReloadResult:
    """What the last reload did, for the log and the status page."""

    #: wall-clock time it finished
    at: float
    ok: bool
    #: one line: what changed, or what was wrong (the file and line at fault)
    summary: str
    changed: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()
    rules: int = 0
    #: open mailbox connections of newly denied addresses, closed with the reason
    closed: int = 0
    #: seconds the event loop spent taking the new settings (the reading is off the loop)
    pause: float = 0.0
    #: seconds the reading took, in a worker thread
    read: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
