"""Typed configuration: the CLI builds these, nothing below the CLI reads the environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pigeonhole.protocol.bodies import DEFAULT_CACHE_BYTES
from pigeonhole.protocol.limits import Limits

LogFormat = Literal["text", "json"]
#: who writes and fdatasyncs each batch: a helper process, or the event loop writes and a
#: worker thread syncs, or the loop does both (it waits for the disk)
CommitSync = Literal["process", "thread", "loop"]

#: when another side's copy of a `message` leaves: at once, or once the `add` is durable
#: like the sender's own echo (its confirmation), which always waits
PeerDelivery = Literal["immediate", "durable"]

#: Loopback addresses are trusted as proxies by default: a proxy on the same host is
#: the usual deployment, and only it can set X-Real-IP / X-Real-Port.
DEFAULT_TRUSTED_PROXIES: tuple[str, ...] = ("127.0.0.0/8", "::1/128")

#: the admin listener's port: beside the mailbox's 4000, clear of the transit relay's 4001
DEFAULT_ADMIN_PORT = 4080


@dataclass(frozen=True)
class ServerConfig:
    """Everything `pigeonhole serve` needs; the defaults run with no configuration."""

    host: str = "127.0.0.1"
    port: int = 4000
    data_dir: Path = field(default_factory=lambda: Path("pigeonhole-data"))
    #: a postgresql:// URL to keep the state in PostgreSQL; None: SQLite in `data_dir`
    store: str | None = None
    websocket_path: str = "/v1"
    motd: str | None = None
    signal_error: str | None = None
    advertise_version: str | None = None
    disallow_list: bool = False
    blur_usage: int | None = None
    #: a mailbox untouched for this long (seconds) is pruned (reference: 11 minutes)
    prune_expiry: float = 11 * 60.0
    #: how often pruning runs (reference: every 5 minutes)
    prune_interval: float = 5 * 60.0
    usage_sample_interval: float = 60.0
    log_format: LogFormat = "text"
    log_level: str = "INFO"
    trusted_proxies: tuple[str, ...] = DEFAULT_TRUSTED_PROXIES
    #: largest WebSocket frame accepted; bigger ones are closed with 1009
    max_frame_bytes: int = 4 * 1024 * 1024
    #: seconds to wait for connections to close on shutdown
    shutdown_timeout: float = 5.0
    #: permission methods offered in the welcome: "none" and/or "hashcash"
    permissions: tuple[str, ...] = ("none",)
    hashcash_bits: int = 20
    #: under load the required bits rise, one per doubling of the connection rate
    #: above `hashcash_load_threshold` connections/s, up to this many bits
    hashcash_max_bits: int = 24
    hashcash_load_threshold: float = 20.0
    limits: Limits = field(default_factory=Limits)
    max_connections: int = 10000
    max_connections_per_address: int = 100
    #: frames held for one client while their commits are pending; beyond, it is closed
    max_queued_frames: int = 1024
    #: bytes written but not yet taken by the client; beyond, it is dropped as not reading
    #: (a full mailbox, 8 MiB of messages, is replayed at once on `open`)
    max_buffered_bytes: int = 16 * 1024 * 1024
    #: seconds a client may stay behind (over 64 KiB unread) before it is dropped
    send_timeout: float = 30.0
    commit_sync: CommitSync = "process"
    #: batches a node of a shared PostgreSQL store decides at once, each on a writer
    #: connection of its own (one measured best on a 2-core machine where the node,
    #: PostgreSQL and the load share the cores; a database across a network, where a
    #: batch mostly waits, is where more lanes pay)
    node_lanes: int = 1
    peer_delivery: PeerDelivery = "immediate"
    #: seconds a new connection has to send its whole request head before it is dropped
    handshake_timeout: float = 10.0
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: the Whisper-style archive at /whisper/v6 (docs/archive.md)
    archive: bool = True
    archive_password: str = "status-offline-inbox"
    archive_min_request_interval: float = 0.0
    archive_retention_days: int = 30
    #: recent message bodies kept in memory (hex characters); the store holds them all
    body_cache_bytes: int = DEFAULT_CACHE_BYTES
    #: below this many free bytes in the data directory only small bodies are stored and
    #: /health answers 503 (the room left serves real exchanges, the WAL and usage rows)
    disk_free_watermark: int = 128 * 1024 * 1024
    disk_check_interval: float = 1.0
    #: repeated refusals of one kind are logged once per interval, then as a count
    log_summary_interval: float = 60.0
    #: the admin listener (/status, /status.json, /metrics, /health; docs/status.md):
    #: plain HTTP for operators only, so loopback by default; False: no admin listener
    admin: bool = True
    admin_host: str = "127.0.0.1"
    #: 0: a free port (tests; `MailboxServer.admin_port` tells which)
    admin_port: int = DEFAULT_ADMIN_PORT
    #: also answer /metrics on the public listener (it was there before the admin one)
    public_metrics: bool = False
    #: seconds between the status page's refreshes from /status.json
    status_refresh: float = 2.0

    @property
    def channel_db(self) -> Path:
        return self.data_dir / "channel.sqlite"

    @property
    def usage_db(self) -> Path:
        return self.data_dir / "usage.sqlite"
