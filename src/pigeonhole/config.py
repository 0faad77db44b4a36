"""Typed configuration: the CLI builds these, nothing below the CLI reads the environment.

Every option of `pigeonhole serve` is declared here once, as a field made with `setting`
(pigeonhole/settings.py): its default, help, bounds and unit; the command line, the
PIGEONHOLE_SERVE_* names, the `--config` keys and `--check-config` are made from it
(cli/options.py), and a test holds the README's option table to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pigeonhole.archive import config as archive_defaults
from pigeonhole.clients import DEFAULT_IPV6_PREFIX
from pigeonhole.protocol.bodies import DEFAULT_CACHE_BYTES
from pigeonhole.protocol.limits import Limits, MiB
from pigeonhole.protocol.settings import setting
from pigeonhole.transit.config import TransitConfig

#: the transit relay's defaults, offered as the `--transit-*` options
_RELAY = TransitConfig()

LogFormat = Literal["text", "json"]
#: who writes and fdatasyncs each batch: a helper process, or the event loop writes and a
#: worker thread syncs, or the loop does both (it waits for the disk)
CommitSync = Literal["process", "thread", "loop"]

#: when another side's copy of a `message` leaves: at once, or once the `add` is durable
#: like the sender's own echo (its confirmation), which always waits
PeerDelivery = Literal["immediate", "durable"]

#: permission methods a server may offer in its welcome
Permission = Literal["none", "hashcash"]

#: Loopback addresses are trusted as proxies by default: a proxy on the same host is
#: the usual deployment, and only it can set X-Real-IP / X-Real-Port.
DEFAULT_TRUSTED_PROXIES: tuple[str, ...] = ("127.0.0.0/8", "::1/128")

#: the admin listener's port: beside the mailbox's 4000, clear of the transit relay's 4001
DEFAULT_ADMIN_PORT = 4080


@dataclass(frozen=True)
class ServerConfig:
    """Everything `pigeonhole serve` needs; the defaults run with no configuration."""

    host: str = setting("127.0.0.1", "Address to listen on.", restart=True)
    port: int = setting(4000, "TCP port.", restart=True)
    data_dir: Path = setting(
        Path("pigeonhole-data"),
        "Directory for every database (channel.sqlite, usage.sqlite).",
        path="dir",
        restart=True,
    )
    #: None: SQLite in `data_dir`
    store: str | None = setting(
        None,
        "Keep the state in this PostgreSQL database (schema created on first start) instead"
        " of SQLite in --data-dir; any number of nodes on one database are one server.",
        metavar="postgresql://USER@HOST:PORT/DBNAME",
        restart=True,
    )
    #: each lane is a writer connection of its own; one does best (measured) on 2 cores
    #: shared by the node, PostgreSQL and the load; a database across a network is where
    #: more pay
    node_lanes: int = setting(
        1,
        "Batches a PostgreSQL node decides at once (on writer connections of its own).",
        min=1,
        restart=True,
    )
    motd: str | None = setting(None, "Message of the day shown by clients.")
    signal_error: str | None = setting(None, "Welcome error: clients show it and stop.")
    advertise_version: str | None = setting(None, "Welcome current_cli_version.")
    disallow_list: bool = setting(False, "Answer `list` with no nameplates.")
    blur_usage: int | None = setting(
        None,
        "Round usage times down to this many seconds; never log client addresses.",
        min=1,
        restart=True,
    )
    #: the reference prunes after 11 minutes, every 5 minutes
    prune_expiry: float = setting(
        11 * 60.0,
        "Seconds without activity after which a channel is pruned.",
        min=0,
        unit="seconds",
    )
    prune_interval: float = setting(
        5 * 60.0,
        "Seconds between pruning runs.",
        min=0.01,
        unit="seconds",
        restart=True,
    )
    usage_sample_interval: float = setting(
        60.0,
        "Seconds between connection-count usage samples.",
        min=0.01,
        unit="seconds",
        restart=True,
    )
    #: off by default: the usage history is kept whole (store/retention.py)
    usage_retention_days: int | None = setting(
        None,
        "Delete usage rows older than this many days, in the background in small batches"
        " (default: keep them all; export them first, docs/operations.md).",
        min=1,
        restart=True,
    )
    #: bigger frames are closed with 1009
    max_frame_bytes: int = setting(
        4 * MiB, "Largest WebSocket frame accepted.", min=1024, unit="bytes"
    )
    trusted_proxies: tuple[str, ...] = setting(
        DEFAULT_TRUSTED_PROXIES,
        "Network whose X-Real-IP/X-Real-Port headers are believed.",
        option="trusted-proxy",
    )
    #: server/rules.py; docs/operations.md, "Rules that say why"; re-read on SIGHUP
    deny_file: Path | None = setting(
        None,
        "Rules, one a line: `deny NET REASON...` refuses those clients with the reason,"
        " `notice NET MESSAGE...` serves them with the message as motd.",
        path="file",
        metavar="FILE",
    )
    #: pigeonhole/clients.py: the one rule for what counts as one client
    ipv6_prefix: int = setting(
        DEFAULT_IPV6_PREFIX,
        "IPv6 clients are counted by this prefix: every per-address limit and quota treats"
        " one /N as one client.",
        min=8,
        max=128,
        restart=True,
    )
    permissions: tuple[Permission, ...] = setting(
        ("none",), "Permission methods offered, comma-separated: none, hashcash.", separator=","
    )
    hashcash_bits: int = setting(
        20, "Hashcash bits required when the server is quiet.", min=1, max=40
    )
    #: under load the required bits rise, one per doubling of the connection rate
    #: above `hashcash_load_threshold` connections/s, up to this many bits
    hashcash_max_bits: int = setting(24, "Most hashcash bits required under load.", min=1, max=40)
    hashcash_load_threshold: float = setting(
        20.0, "New connections/s above which each doubling adds one hashcash bit.", min=0
    )
    #: the protocol's bounds; their fields are options too (protocol/limits.py)
    limits: Limits = field(default_factory=Limits)
    #: the room left below it serves real exchanges, the WAL and usage rows
    disk_free_watermark: int = setting(
        128 * MiB,
        "Free bytes in the data directory below which only small bodies are stored "
        "and /health answers 503.",
        min=0,
        unit="bytes",
    )
    body_cache_bytes: int = setting(
        DEFAULT_CACHE_BYTES,
        "Recent message bodies kept in memory (hex characters); the rest are read from "
        "the store when replayed.",
        min=0,
        unit="bytes",
        restart=True,
    )
    log_summary_interval: float = setting(
        60.0,
        "Seconds over which repeated refusals of one kind are logged once, then counted.",
        min=1,
        unit="seconds",
        restart=True,
    )
    max_connections: int = setting(10000, "Total WebSocket connections.", min=1)
    max_connections_per_address: int = setting(100, "Connections from one client address.", min=1)
    max_queued_frames: int = setting(
        1024, "Frames held for one client while their commits are pending, before close.", min=8
    )
    #: a full mailbox, 8 MiB of messages, is replayed at once on `open`
    max_buffered_bytes: int = setting(
        16 * MiB,
        "Bytes sent but not yet read by one client before it is dropped as not reading.",
        min=64 * 1024,
        unit="bytes",
    )
    send_timeout: float = setting(
        30.0,
        "Seconds a client may stay behind (64 KiB unread) before it is dropped as slow.",
        min=0.1,
        unit="seconds",
    )
    commit_sync: CommitSync = setting(
        "process",
        "Who writes and fdatasyncs each batch: a helper process (default), or the event "
        "loop writes and a worker thread syncs, or the loop does both (it waits for the disk); "
        "see bench/README.md. Durable every way.",
        restart=True,
    )
    peer_delivery: PeerDelivery = setting(
        "immediate",
        "When another side's copy of a message leaves: at once, or after the add is "
        "durable. The sender's own echo, its confirmation, always waits for durability.",
        restart=True,
    )
    tls_cert: Path | None = setting(
        None,
        "PEM certificate chain: serve wss:// directly.",
        path="file",
        restart=True,
    )
    tls_key: Path | None = setting(
        None, "PEM private key for --tls-cert.", path="file", restart=True
    )
    #: docs/archive.md
    archive: bool = setting(True, "Serve the Whisper-style archive at /whisper/v6.", restart=True)
    archive_password: str = setting(
        "status-offline-inbox",
        "Password the archive's request key is derived from (PBKDF2).",
        restart=True,
    )
    archive_min_request_interval: float = setting(
        0.0,
        "Minimum seconds between requests per peer.",
        min=0,
        unit="seconds",
    )
    archive_retention_days: int = setting(
        30, "Delete archived envelopes older than this.", min=0, restart=True
    )
    archive_min_pow: float = setting(
        archive_defaults.DEFAULT_MIN_POW,
        "Minimum proof of work of archived envelopes (Status used 0.001; geth 0.2).",
        min=0,
    )
    archive_max_bytes_per_address: int = setting(
        archive_defaults.DEFAULT_MAX_BYTES_PER_ADDRESS,
        "Envelope bytes the archive keeps from one client address (IPv6: its prefix).",
        min=0,
        unit="bytes",
    )
    archive_max_bytes: int = setting(
        archive_defaults.DEFAULT_MAX_BYTES,
        "Envelope bytes the archive keeps in all.",
        min=0,
        unit="bytes",
    )
    archive_disk_free: int = setting(
        archive_defaults.DEFAULT_MIN_DISK_FREE,
        "Below this many free bytes in --data-dir the archive stores no new envelopes (keep"
        " it well above --disk-free-watermark, so the archive never pushes the mailbox into"
        " low-disk mode).",
        min=0,
        unit="bytes",
    )
    #: docs/transit.md; the relay's own defaults (transit/config.py) are the options'
    transit: bool = setting(
        True,
        "Run the transit relay: TCP on --transit-port, WebSocket at /transit on --port.",
        restart=True,
    )
    transit_port: int = setting(
        4001,
        "TCP port of the transit relay, on the same interfaces as --host (0: any free port).",
        min=0,
        max=65535,
        restart=True,
    )
    transit_handshake_timeout: float = setting(
        _RELAY.handshake_timeout,
        "Seconds a relay connection has to send its handshake line.",
        min=0.1,
        unit="seconds",
    )
    transit_lonely_timeout: float = setting(
        _RELAY.lonely_timeout,
        "Seconds a handshaken relay connection waits for its partner.",
        min=0.1,
        unit="seconds",
    )
    transit_idle_timeout: float = setting(
        _RELAY.idle_timeout,
        "Seconds a relayed pair may move no byte before both are closed.",
        min=0.1,
        unit="seconds",
    )
    transit_max_connections: int = setting(
        _RELAY.max_connections, "Relay connections in all (TCP and WebSocket).", min=1
    )
    transit_max_connections_per_address: int = setting(
        _RELAY.max_connections_per_address,
        "Relay connections from one client address (IPv6: its prefix).",
        min=1,
    )
    transit_pair_buffer_bytes: int = setting(
        _RELAY.pair_buffer_bytes,
        "Bytes held for one relayed pair; a receiver that does not read stops its sender.",
        min=8192,
        unit="bytes",
        restart=True,
    )
    transit_max_bytes_per_address_per_day: int | None = setting(
        _RELAY.max_bytes_per_address_per_day,
        "Bytes one client address may relay per UTC day (default: no cap).",
        min=1,
        unit="bytes",
    )
    transit_max_bytes_per_transfer: int | None = setting(
        _RELAY.max_bytes_per_transfer,
        "Bytes one relayed pair may carry (default: no cap).",
        min=1,
        unit="bytes",
    )
    transit_max_rate: int | None = setting(
        _RELAY.max_rate_bytes_per_second,
        "Bytes per second one relay connection may send (default: no cap).",
        min=1,
        unit="bytes",
    )
    transit_drain_timeout: float = setting(
        _RELAY.drain_timeout,
        "Seconds active relayed pairs may take to finish once the server is told to stop.",
        min=0,
        unit="seconds",
    )
    transit_node_address: str | None = setting(
        None,
        "HOST:PORT at which other nodes of the --store reach this node's relay, to join a"
        " pair whose first side waits here (default: 127.0.0.1 and --transit-port).",
        metavar="HOST:PORT",
        restart=True,
    )
    #: docs/web.md
    web: bool = setting(
        True,
        "Serve the browser page: `/` to a browser (Accept: text/html), its files at /web/.",
        restart=True,
    )
    #: plain HTTP for operators only, so loopback by default
    admin: bool = setting(
        True,
        "Serve the admin listener: /status, /status.json, /metrics, /health (docs/status.md).",
        restart=True,
    )
    admin_host: str = setting(
        "127.0.0.1",
        "Address of the admin listener: loopback or a private network, never the world.",
        restart=True,
    )
    #: 0 in tests (`MailboxServer.admin_port` tells which port it got)
    admin_port: int = setting(
        DEFAULT_ADMIN_PORT,
        "TCP port of the admin listener (0: any free port).",
        min=0,
        max=65535,
        restart=True,
    )
    public_metrics: bool = setting(
        False,
        "Also answer /metrics on the public listener, not only on the admin listener.",
        restart=True,
    )
    status_refresh: float = setting(
        2.0, "Seconds between the status page's refreshes.", min=0.5, unit="seconds"
    )
    log_format: LogFormat = setting("text", "Log line format.", restart=True)
    log_level: str = setting("INFO", "Log level.")

    # Not options: the tests and the code set these.
    websocket_path: str = "/v1"
    #: seconds to wait for connections to close on shutdown
    shutdown_timeout: float = 5.0
    #: seconds a new connection has to send its whole request head before it is dropped
    handshake_timeout: float = 10.0
    disk_check_interval: float = 1.0
    #: seconds between usage retention passes (the first is at start)
    usage_retention_interval: float = 3600.0

    @property
    def channel_db(self) -> Path:
        return self.data_dir / "channel.sqlite"

    @property
    def usage_db(self) -> Path:
        return self.data_dir / "usage.sqlite"
