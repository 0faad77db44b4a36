"""Builds the server's context (server/context.py) once, in dependency order.

Each part is made from what is made before it: nothing is bound late, and no part is
given the server. `build_context` is the one place to read for what a part receives.
"""

from __future__ import annotations

import base64
import logging
import secrets
import time

from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.endpoint import ArchiveService
from pigeonhole.config import ServerConfig
from pigeonhole.permissions.policy import PermissionPolicy
from pigeonhole.protocol.bodies import BodyCache
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.server.addresses import ClientResolver
from pigeonhole.server.connections import Connections
from pigeonhole.server.context import ServerContext
from pigeonhole.server.core import Clock, Core
from pigeonhole.server.events import Events, Tasks
from pigeonhole.server.health import StorageHealth
from pigeonhole.server.log_summary import LogSummary
from pigeonhole.server.metrics import Metrics
from pigeonhole.server.rules import read_rules
from pigeonhole.server.settings import Settings, Uptime
from pigeonhole.server.storage import make_storage
from pigeonhole.server.transit import TransitService, admits
from pigeonhole.store.group_commit import GroupCommitter

log = logging.getLogger("pigeonhole.server")


def new_mailbox_id() -> str:
    """13 characters of base32: 64 random bits, as the reference makes them."""
    return base64.b32encode(secrets.token_bytes(8)).decode("ascii").lower().strip("=")


SECURE_RANDOMNESS = Randomness(secrets.choice, secrets.randbelow, new_mailbox_id)


def build_context(config: ServerConfig, clock: Clock = time.time) -> ServerContext:
    """The context of a server with `config`, reading the time from `clock`."""
    #: the settings in force and the rules of their --deny-file (a bad file: RuleError)
    settings = Settings(config, read_rules(config))
    metrics = Metrics()
    events = Events(settings, metrics, LogSummary(log, time.monotonic))
    permissions = PermissionPolicy(
        methods=config.permissions,
        bits=config.hashcash_bits,
        max_bits=max(config.hashcash_max_bits, config.hashcash_bits),
        load_threshold=config.hashcash_load_threshold,
    )
    rendezvous = Rendezvous(
        SECURE_RANDOMNESS, config.blur_usage, config.limits, BodyCache(config.body_cache_bytes)
    )
    #: where the state is stored: SQLite in the data directory, or PostgreSQL
    storage = make_storage(config)
    #: failing commits and a full disk: what is refused meanwhile, and /health's reason
    health = StorageHealth(config, storage.ping, rendezvous.ledger, metrics, events.summary)
    committer = GroupCommitter(
        storage.syncer, health.failed, metrics.observe_commit, health.recovered
    )
    addresses = ClientResolver(settings, events.bad_input)
    core = Core(
        settings=settings,
        clock=clock,
        metrics=metrics,
        events=events,
        tasks=Tasks(),
        permissions=permissions,
        rendezvous=rendezvous,
        health=health,
        committer=committer,
        clients=Connections(settings, metrics),
        addresses=addresses,
        uptime=Uptime(),
    )
    transit = (
        TransitService(
            config,
            committer,
            storage.transit_waiting(),
            clock,
            admit=admits(settings, metrics.denied_by_rule),
        )
        if config.transit
        else None
    )
    archive = (
        ArchiveService(
            archive_config(config),
            clock,
            addresses.peer_of,
            health.refusing,
        )
        if config.archive
        else None
    )
    # how commands are decided: in memory as they arrive (SQLite), or in batches in the
    # database this process shares with other nodes (PostgreSQL)
    decider = storage.decider(core, SECURE_RANDOMNESS)
    return ServerContext.of(core, storage, decider, transit, archive)


def archive_config(c: ServerConfig) -> ArchiveConfig:
    """The archive's settings, from the server's."""
    return ArchiveConfig(
        data_dir=c.data_dir,
        password=c.archive_password,
        min_request_interval=c.archive_min_request_interval,
        retention_days=c.archive_retention_days,
        min_pow=c.archive_min_pow,
        max_bytes_per_address=c.archive_max_bytes_per_address,
        max_bytes=c.archive_max_bytes,
        min_disk_free=c.archive_disk_free,
        store_owners=not c.blur_usage,
        ipv6_prefix=c.ipv6_prefix,
    )
