"""A reload (SIGHUP): the settings and the rules read again and taken without a restart.

The reading (the `--config` file through the command's own parser, the `--deny-file`)
happens in a worker thread, so a 10,000-rule file does not stall the event loop; taking
the result is one short step on the loop: the settings are replaced whole (parts read
`ctx.settings.current` when they act), the rules with them, the log level and the
relay's bounds set, and open mailbox connections of addresses the new rules deny get the
reason in an `error` and are closed. Nothing else is closed, so waiting clients wait on.

A file that does not parse, an unknown key, a value out of bounds or a bad rule changes
nothing: the error (with the file and line at fault) is logged and kept for the status
page, as is every reload's time and result. Restart-only settings that differ are logged
as "needs a restart" and keep their running values (server/reloading.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from pigeonhole.config import ServerConfig
from pigeonhole.server.context import ServerContext
from pigeonhole.server.reloading import ReloadResult, applicable, changes
from pigeonhole.server.rules import Deny, RuleError, RuleSet, read_rules
from pigeonhole.server.wiring import archive_config

log = logging.getLogger("pigeonhole.reload")

#: reads the settings as at start (cli/reload.py's ConfigReader.read); raises ReloadError
ReadConfig = Callable[[], ServerConfig]


class ReloadError(Exception):
    """Settings that cannot be used; the message says what and where (file and line)."""


class Reloader:
    """Reloads one server's settings and rules; one reload at a time."""

    def __init__(self, ctx: ServerContext, read: ReadConfig | None = None) -> None:
        self._ctx = ctx
        #: how `serve` reads its settings (None: they stay, only the rules are read again)
        self._read = read
        self._lock = asyncio.Lock()

    def _read_both(self, read: ReadConfig | None) -> tuple[ServerConfig, RuleSet]:
        """In a worker thread: the settings, and the rules of their --deny-file."""
        config = read() if read is not None else self._ctx.settings.current
        if not isinstance(logging.getLevelName(config.log_level.upper()), int):
            raise ReloadError(f"--log-level: no level named {config.log_level!r}")
        return config, read_rules(config, self._ctx.settings.rules)

    async def reload(self, read: ReadConfig | None = None) -> ReloadResult:
        """Read and take the settings (from `read`, or the reader given at start; with
        neither they stay) and the rules; what happened (also logged and kept)."""
        async with self._lock:
            began = time.perf_counter()
            try:
                config, rules = await asyncio.to_thread(self._read_both, read or self._read)
            except (ReloadError, RuleError) as err:
                return self._refused(str(err))
            except Exception as err:  # a bug must not stop the server: nothing changes
                log.exception("reload failed")
                return self._refused(f"{type(err).__name__}: {err}")
            return self._take(config, rules, time.perf_counter() - began)

    def _refused(self, why: str) -> ReloadResult:
        log.error("reload refused, nothing changed: %s", why)
        ctx = self._ctx
        ctx.metrics.reloads["refused"] += 1
        result = ReloadResult(ctx.clock(), False, f"refused, nothing changed: {why}")
        ctx.settings.reloaded = result
        return result

    def _take(self, config: ServerConfig, rules: RuleSet, reading: float) -> ReloadResult:
        """On the loop: swap the settings and rules in, and deny what they now deny."""
        ctx = self._ctx
        began = time.perf_counter()
        old = ctx.settings.current
        found = changes(old, config)
        taken = applicable(old, config)
        live = [change for change in found if not change.restart]
        later = [change for change in found if change.restart]
        ctx.settings.replace(taken, rules)
        self._apply(old, taken)
        closed = self._close_denied(rules)
        pause = time.perf_counter() - began
        for change in live:
            log.info("reload: %s", change)
        for change in later:
            log.warning("reload: %s needs a restart; the running value is kept", change)
        summary = (
            f"{len(live)} settings changed, {len(later)} need a restart;"
            f" {rules.denies} deny and {rules.notices} notice rules; {closed} closed"
        )
        log.info("reloaded: %s", summary)
        ctx.metrics.reloads["ok"] += 1
        result = ReloadResult(
            ctx.clock(),
            True,
            summary,
            tuple(str(change) for change in live),
            tuple(str(change) for change in later),
            len(rules),
            closed,
            pause,
            reading,
        )
        ctx.settings.reloaded = result
        return result

    def _apply(self, old: ServerConfig, new: ServerConfig) -> None:
        """What parts made at start hold of the settings, set to the new ones (the rest
        read `settings.current` when they act): the log level, the permission policy, the
        ledger's limits, the disk watermark, the relay's and the archive's bounds."""
        ctx = self._ctx
        if new.log_level != old.log_level:
            logging.getLogger().setLevel(new.log_level.upper())
        policy = ctx.permissions
        policy.methods = new.permissions
        policy.bits = new.hashcash_bits
        policy.max_bits = max(new.hashcash_max_bits, new.hashcash_bits)
        policy.load_threshold = new.hashcash_load_threshold
        ctx.ledger.limits = new.limits
        ctx.health.disk.watermark = new.disk_free_watermark
        if ctx.transit is not None:
            ctx.transit.reconfigure(new)
        if ctx.archive is not None:
            ctx.archive.reconfigure(archive_config(new))

    def _close_denied(self, rules: RuleSet) -> int:
        """Open mailbox connections the rules deny: the reason in an `error`, then closed."""
        if not rules.denies:
            return 0
        closed = 0
        for conn in list(self._ctx.clients):
            rule = rules.match(conn.host)
            if isinstance(rule, Deny) and conn.deny(rule.reason):
                closed += 1
        return closed
