"""ArchiveConfig: everything the archive endpoint needs; the defaults run as they are."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: the password Status's public mailservers used (notes §3.1); requests are encrypted
#: so that other peers cannot read them, not to keep anyone out
DEFAULT_PASSWORD = "status-offline-inbox"
#: status-go's `maxMessagesRequestPayloadLimit` and default limit
DEFAULT_LIMIT = 1000
#: Whisper's DefaultMaxMessageSize
ONE_MIB = 1024 * 1024
#: the archive's bounds by default: a client may keep 32 MiB (thousands of chat messages
#: over the 30-day retention), the archive 1 GiB, and it takes nothing new below 1 GiB of
#: free disk: eight times the mailbox's low-disk watermark, so it can never cause it
DEFAULT_MAX_BYTES_PER_ADDRESS = 32 * ONE_MIB
DEFAULT_MAX_BYTES = 1024 * ONE_MIB
DEFAULT_MIN_DISK_FREE = 1024 * ONE_MIB
#: Status's minimum proof of work (geth used 0.2)
DEFAULT_MIN_POW = 0.001


@dataclass(frozen=True)
class ArchiveConfig:
    """Settings of the Whisper-style archive served at `path` (e.g. /whisper/v6)."""

    #: the server's data directory; the archive is `archive.sqlite` in it
    data_dir: Path = field(default_factory=lambda: Path("pigeonhole-data"))
    #: the symmetric key of requests is PBKDF2(password) (notes §3.1)
    password: str = DEFAULT_PASSWORD
    #: WebSocket path of the endpoint
    path: str = "/whisper/v6"
    #: minimum seconds between two requests of one peer (0: no limit)
    min_request_interval: float = 0.0
    #: envelopes created more than this many days ago are deleted (0: keep forever)
    retention_days: int = 30
    #: seconds between retention runs (status-go: hourly)
    retention_interval: float = 3600.0
    #: a 0x7f bundle stays under this many bytes of envelopes (status-go: max message size)
    max_batch_bytes: int = ONE_MIB
    #: largest envelope accepted, as EIP-627 size() = 20 + len(Data)
    max_envelope_size: int = ONE_MIB
    #: Limit 0 in a request means this many envelopes
    default_limit: int = DEFAULT_LIMIT
    #: a request with a larger Limit is refused
    max_limit: int = DEFAULT_LIMIT
    #: minimum proof of work of archived envelopes (Status: 0.001; geth: 0.2)
    min_pow: float = DEFAULT_MIN_POW
    #: minimum proof of work of request envelopes (0: not checked)
    min_request_pow: float = 0.0
    #: archive envelopes whose expiry has passed (imports, back-dated tests)
    accept_expired: bool = False
    #: accept status-go's raw binary request layout when the payload is not RLP
    raw_requests: bool = False
    #: envelope bytes kept from one client (archive/quota.py; 0: no limit)
    max_bytes_per_address: int = DEFAULT_MAX_BYTES_PER_ADDRESS
    #: envelope bytes kept in all (0: no limit)
    max_bytes: int = DEFAULT_MAX_BYTES
    #: below this many free bytes in `data_dir` no new envelope is stored
    min_disk_free: int = DEFAULT_MIN_DISK_FREE
    #: keep who posted each envelope on disk (False under --blur-usage: the quota is
    #: then counted in memory only, and a restart forgets who held what)
    store_owners: bool = True
    #: stored owners are regrouped by this IPv6 prefix when the archive opens
    ipv6_prefix: int = 64

    def __post_init__(self) -> None:
        if not 0 < self.default_limit <= self.max_limit:
            raise ValueError("need 0 < default_limit <= max_limit")
        if self.retention_days < 0 or self.retention_interval <= 0:
            raise ValueError("retention_days must be >= 0 and retention_interval > 0")
        if self.max_batch_bytes <= 0 or self.max_envelope_size <= 0:
            raise ValueError("size limits must be positive")
        if min(self.max_bytes_per_address, self.max_bytes, self.min_disk_free) < 0:
            raise ValueError("archive bounds must be >= 0")
        if self.min_request_interval < 0:
            raise ValueError("min_request_interval must be >= 0")
        if not self.path.startswith("/"):
            raise ValueError("path must start with '/'")

    @property
    def archive_db(self) -> Path:
        return self.data_dir / "archive.sqlite"

    @property
    def max_frame_bytes(self) -> int:
        """Largest WebSocket message accepted: one envelope of the maximum size, framed."""
        return self.max_envelope_size + 1024
