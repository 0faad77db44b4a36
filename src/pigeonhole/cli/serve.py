"""`pigeonhole serve`: options -> ServerConfig -> MailboxServer, until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import signal
from pathlib import Path
from typing import Any, cast

import click

from pigeonhole.cli.config_file import config_option
from pigeonhole.cli.logs import setup_logging
from pigeonhole.config import (
    DEFAULT_ADMIN_PORT,
    DEFAULT_TRUSTED_PROXIES,
    CommitSync,
    ServerConfig,
)
from pigeonhole.protocol.limits import Limits, MiB
from pigeonhole.server.app import MailboxServer
from pigeonhole.store.errors import StoreError

log = logging.getLogger("pigeonhole.serve")


@click.command()
@config_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=4000, show_default=True, type=int, help="TCP port.")
@click.option(
    "--data-dir",
    default="pigeonhole-data",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for every database (channel.sqlite, usage.sqlite).",
)
@click.option(
    "--store",
    default=None,
    metavar="postgresql://USER@HOST:PORT/DBNAME",
    help="Keep the state in this PostgreSQL database (schema created on first start)"
    " instead of SQLite in --data-dir; one node per database for now.",
)
@click.option("--motd", default=None, help="Message of the day shown by clients.")
@click.option("--signal-error", default=None, help="Welcome error: clients show it and stop.")
@click.option("--advertise-version", default=None, help="Welcome current_cli_version.")
@click.option("--disallow-list", is_flag=True, help="Answer `list` with no nameplates.")
@click.option(
    "--blur-usage",
    default=None,
    type=click.IntRange(min=1),
    help="Round usage times down to this many seconds; never log client addresses.",
)
@click.option(
    "--prune-expiry",
    default=660.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds without activity after which a channel is pruned.",
)
@click.option(
    "--prune-interval",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Seconds between pruning runs.",
)
@click.option(
    "--usage-sample-interval",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Seconds between connection-count usage samples.",
)
@click.option(
    "--max-frame-bytes",
    default=4 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest WebSocket frame accepted.",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    default=DEFAULT_TRUSTED_PROXIES,
    show_default=True,
    help="Network whose X-Real-IP/X-Real-Port headers are believed.",
)
@click.option(
    "--permissions",
    default="none",
    show_default=True,
    help="Permission methods offered, comma-separated: none, hashcash.",
)
@click.option(
    "--hashcash-bits",
    default=20,
    show_default=True,
    type=click.IntRange(1, 40),
    help="Hashcash bits required when the server is quiet.",
)
@click.option(
    "--hashcash-max-bits",
    default=24,
    show_default=True,
    type=click.IntRange(1, 40),
    help="Most hashcash bits required under load.",
)
@click.option(
    "--hashcash-load-threshold",
    default=20.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="New connections/s above which each doubling adds one hashcash bit.",
)
@click.option(
    "--max-body-bytes",
    default=1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest decoded `add` body.",
)
@click.option(
    "--max-mailbox-messages",
    default=300,
    show_default=True,
    type=click.IntRange(min=1),
    help="Messages one mailbox may hold.",
)
@click.option(
    "--max-mailbox-bytes",
    default=8 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Body bytes one mailbox may hold.",
)
@click.option(
    "--max-creations",
    default=4,
    show_default=True,
    type=click.IntRange(min=1),
    help="Nameplates plus mailboxes one connection may create.",
)
@click.option(
    "--max-stored-bytes-per-address",
    default=64 * MiB,
    show_default=True,
    type=click.IntRange(min=1),
    help="Body bytes stored from one client address until its mailboxes are closed or pruned.",
)
@click.option(
    "--max-stored-bytes",
    default=2048 * MiB,
    show_default=True,
    type=click.IntRange(min=1),
    help="Body bytes stored on the whole server.",
)
@click.option(
    "--max-nameplates-per-address",
    default=32,
    show_default=True,
    type=click.IntRange(min=1),
    help="Live nameplates created from one client address, across its connections.",
)
@click.option(
    "--max-mailboxes-per-address",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Live mailboxes created from one client address, across its connections.",
)
@click.option(
    "--disk-free-watermark",
    default=128 * MiB,
    show_default=True,
    type=click.IntRange(min=0),
    help="Free bytes in the data directory below which only small bodies are stored "
    "and /health answers 503.",
)
@click.option(
    "--low-disk-max-body-bytes",
    default=16 * 1024,
    show_default=True,
    type=click.IntRange(min=0),
    help="Largest body stored while the disk is below the watermark.",
)
@click.option(
    "--body-cache-bytes",
    default=32 * MiB,
    show_default=True,
    type=click.IntRange(min=0),
    help="Recent message bodies kept in memory (hex characters); the rest are read from "
    "the store when replayed.",
)
@click.option(
    "--log-summary-interval",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Seconds over which repeated refusals of one kind are logged once, then counted.",
)
@click.option(
    "--commands-per-second",
    default=20.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Sustained commands/s per connection.",
)
@click.option(
    "--command-burst",
    default=100.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Commands allowed at once above the rate.",
)
@click.option(
    "--max-connections",
    default=10000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Total WebSocket connections.",
)
@click.option(
    "--max-connections-per-address",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="Connections from one client address.",
)
@click.option(
    "--max-queued-frames",
    default=1024,
    show_default=True,
    type=click.IntRange(min=8),
    help="Frames held for one client while their commits are pending, before close.",
)
@click.option(
    "--max-buffered-bytes",
    default=16 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=64 * 1024),
    help="Bytes sent but not yet read by one client before it is dropped as not reading.",
)
@click.option(
    "--send-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds a client may stay behind (64 KiB unread) before it is dropped as slow.",
)
@click.option(
    "--commit-sync",
    type=click.Choice(["process", "thread", "loop"]),
    default="process",
    show_default=True,
    help="Who writes and fdatasyncs each batch: a helper process (default), or the event "
    "loop writes and a worker thread syncs, or the loop does both (it waits for the disk); "
    "see bench/README.md. Durable every way.",
)
@click.option(
    "--node-lanes",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="With --store: batches of commands this node decides at once, each on a database "
    "connection of its own (more pay when the database is across a network).",
)
@click.option(
    "--peer-delivery",
    type=click.Choice(["immediate", "durable"]),
    default="immediate",
    show_default=True,
    help="When another side's copy of a message leaves: at once, or after the add is "
    "durable. The sender's own echo, its confirmation, always waits for durability.",
)
@click.option(
    "--tls-cert",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="PEM certificate chain: serve wss:// directly.",
)
@click.option(
    "--tls-key",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="PEM private key for --tls-cert.",
)
@click.option(
    "--archive/--no-archive",
    default=True,
    show_default=True,
    help="Serve the Whisper-style archive at /whisper/v6.",
)
@click.option(
    "--archive-password",
    default="status-offline-inbox",
    show_default=True,
    help="Password the archive's request key is derived from (PBKDF2).",
)
@click.option(
    "--archive-min-request-interval",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Minimum seconds between requests per peer.",
)
@click.option(
    "--archive-retention-days",
    default=30,
    show_default=True,
    type=click.IntRange(min=0),
    help="Delete archived envelopes older than this.",
)
@click.option(
    "--admin/--no-admin",
    default=True,
    show_default=True,
    help="Serve the admin listener: /status, /status.json, /metrics, /health (docs/status.md).",
)
@click.option(
    "--admin-host",
    default="127.0.0.1",
    show_default=True,
    help="Address of the admin listener: loopback or a private network, never the world.",
)
@click.option(
    "--admin-port",
    default=DEFAULT_ADMIN_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="TCP port of the admin listener (0: any free port).",
)
@click.option(
    "--public-metrics",
    is_flag=True,
    help="Also answer /metrics on the public listener, as before the admin listener.",
)
@click.option(
    "--status-refresh",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0.5),
    help="Seconds between the status page's refreshes.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log line format.",
)
@click.option("--log-level", default="INFO", show_default=True, help="Log level.")
@click.option(
    "--check-config",
    is_flag=True,
    help="Print the settings as resolved (command line, environment, --config file) and exit.",
)
def serve(
    host: str,
    port: int,
    data_dir: Path,
    store: str | None,
    motd: str | None,
    signal_error: str | None,
    advertise_version: str | None,
    disallow_list: bool,
    blur_usage: int | None,
    prune_expiry: float,
    prune_interval: float,
    usage_sample_interval: float,
    max_frame_bytes: int,
    trusted_proxies: tuple[str, ...],
    permissions: str,
    hashcash_bits: int,
    hashcash_max_bits: int,
    hashcash_load_threshold: float,
    max_body_bytes: int,
    max_mailbox_messages: int,
    max_mailbox_bytes: int,
    max_creations: int,
    max_stored_bytes_per_address: int,
    max_stored_bytes: int,
    max_nameplates_per_address: int,
    max_mailboxes_per_address: int,
    disk_free_watermark: int,
    low_disk_max_body_bytes: int,
    body_cache_bytes: int,
    log_summary_interval: float,
    commands_per_second: float,
    command_burst: float,
    max_connections: int,
    max_connections_per_address: int,
    max_queued_frames: int,
    max_buffered_bytes: int,
    send_timeout: float,
    commit_sync: str,
    node_lanes: int,
    peer_delivery: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    archive: bool,
    archive_password: str,
    archive_min_request_interval: float,
    archive_retention_days: int,
    admin: bool,
    admin_host: str,
    admin_port: int,
    public_metrics: bool,
    status_refresh: float,
    log_format: str,
    log_level: str,
    check_config: bool,
) -> None:
    """Run the mailbox server (WebSocket at ws://HOST:PORT/v1)."""
    setup_logging(log_format, log_level)
    methods = tuple(m.strip() for m in permissions.split(",") if m.strip())
    if not set(methods) <= {"none", "hashcash"} or not methods:
        raise click.BadParameter("use none, hashcash or none,hashcash", param_hint="--permissions")
    if store is not None and not store.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter("a postgresql:// URL", param_hint="--store")
    if (tls_cert is None) != (tls_key is None):
        raise click.BadParameter("give both --tls-cert and --tls-key", param_hint="--tls-cert")
    limits = Limits(
        max_body_bytes=max_body_bytes,
        max_mailbox_messages=max_mailbox_messages,
        max_mailbox_bytes=max_mailbox_bytes,
        max_creations=max_creations,
        commands_per_second=commands_per_second,
        command_burst=command_burst,
        max_stored_bytes_per_address=max_stored_bytes_per_address,
        max_stored_bytes=max_stored_bytes,
        max_nameplates_per_address=max_nameplates_per_address,
        max_mailboxes_per_address=max_mailboxes_per_address,
        low_disk_max_body_bytes=low_disk_max_body_bytes,
    )
    config = ServerConfig(
        host=host,
        port=port,
        data_dir=data_dir,
        store=store,
        motd=motd,
        signal_error=signal_error,
        advertise_version=advertise_version,
        disallow_list=disallow_list,
        blur_usage=blur_usage,
        prune_expiry=prune_expiry,
        prune_interval=prune_interval,
        usage_sample_interval=usage_sample_interval,
        max_frame_bytes=max_frame_bytes,
        trusted_proxies=tuple(trusted_proxies),
        log_format="json" if log_format == "json" else "text",
        log_level=log_level,
        permissions=methods,
        hashcash_bits=hashcash_bits,
        hashcash_max_bits=hashcash_max_bits,
        hashcash_load_threshold=hashcash_load_threshold,
        limits=limits,
        max_connections=max_connections,
        max_connections_per_address=max_connections_per_address,
        max_queued_frames=max_queued_frames,
        max_buffered_bytes=max_buffered_bytes,
        send_timeout=send_timeout,
        commit_sync=cast(CommitSync, commit_sync),
        node_lanes=node_lanes,
        peer_delivery="durable" if peer_delivery == "durable" else "immediate",
        tls_cert=tls_cert,
        tls_key=tls_key,
        archive=archive,
        archive_password=archive_password,
        archive_min_request_interval=archive_min_request_interval,
        archive_retention_days=archive_retention_days,
        body_cache_bytes=body_cache_bytes,
        disk_free_watermark=disk_free_watermark,
        log_summary_interval=log_summary_interval,
        admin=admin,
        admin_host=admin_host,
        admin_port=admin_port,
        public_metrics=public_metrics,
        status_refresh=status_refresh,
    )
    if check_config:
        click.echo(json.dumps(_settings(config), indent=2))
        return
    _install_uvloop()
    try:
        asyncio.run(_serve(config))
    except StoreError as err:
        raise click.ClickException(str(err)) from err


def _settings(config: ServerConfig) -> dict[str, Any]:
    """The resolved configuration as JSON values (paths as strings)."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))  # type: ignore[no-any-return]


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _tune_gc() -> None:
    """Shorter and rarer collector pauses, each of which stalls every connection.

    What exists once the server has started (modules, loaded state) lives as long as the
    process: frozen, it is out of the collector's sight (a full collection at 100
    exchanges in flight took 12 ms instead of 28-31). Full collections come after 100
    middle-generation ones instead of 10 (they were about one every 3 s under load).
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


async def _serve(config: ServerConfig) -> None:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    server = MailboxServer(config)
    try:
        await server.start()
        _tune_gc()
        await stopping.wait()
        log.info("signal received, shutting down")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await server.stop()
