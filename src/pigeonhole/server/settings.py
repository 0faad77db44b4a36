"""The settings in force, in one place that a reload replaces whole."""

from __future__ import annotations

from dataclasses import dataclass

from pigeonhole.config import ServerConfig
from pigeonhole.server.reloading import ReloadResult
from pigeonhole.server.rules import NO_RULES, RuleSet


@dataclass(slots=True)
class Settings:
    """One `ServerConfig`, replaced whole by `replace`: parts read `current` when they act,
    so what a reload changes applies to what comes next."""

    current: ServerConfig
    #: the rules of `current.deny_file` (server/rules.py), replaced with it by a reload
    rules: RuleSet = NO_RULES
    #: what the last reload did (None: none since start), for the status page
    reloaded: ReloadResult | None = None

    def replace(self, config: ServerConfig, rules: RuleSet | None = None) -> None:
        self.current = config
        if rules is not None:
            self.rules = rules


@dataclass(slots=True)
class Uptime:
    """When the server started (set once it has loaded its state)."""

    started: float = 0.0
