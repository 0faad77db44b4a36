"""The settings in force, in one place that a reload replaces whole."""

from __future__ import annotations

from dataclasses import dataclass

from pigeonhole.config import ServerConfig


@dataclass(slots=True)
class Settings:
    """One `ServerConfig`, replaced whole by `replace`: parts read `current` when they act,
    so what a reload changes applies to what comes next."""

    current: ServerConfig

    def replace(self, config: ServerConfig) -> None:
        self.current = config


@dataclass(slots=True)
class Uptime:
    """When the server started (set once it has loaded its state)."""

    started: float = 0.0
