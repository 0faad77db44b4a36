"""Every setting of the transit relay, with defaults that never stop a normal transfer.

A real transfer's two sides connect within seconds of each other (both learn the relay
from the same exchange), send the handshake at once, then move bytes until one side
closes. The timeouts below are minutes, not seconds, and the optional caps are off, so a
10 GB transfer at any speed is never cut; what they stop is a connection that holds a
socket doing nothing, and an address that opens thousands.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class TransitConfig:
    """The relay's bounds. `None` for an optional cap means no cap."""

    #: seconds from connect to a complete handshake line; then closed, mood `empty`
    handshake_timeout: float = 30.0
    #: seconds a handshaken connection waits for its partner; then closed, mood `lonely`
    lonely_timeout: float = 300.0
    #: seconds a pair may move no byte in either direction; then both closed
    idle_timeout: float = 900.0
    #: open relay connections per client address (a key the caller gives: IPv6 by /64)
    max_connections_per_address: int = 200
    #: open relay connections in all (TCP and WebSocket)
    max_connections: int = 10_000
    #: bytes the server holds for one pair, both directions together: a receiver that
    #: does not read stops its sender (back-pressure) once this much is waiting. Half is
    #: a direction's splice pipe, whose size sets the CPU per GB: 1 MiB (the largest an
    #: unprivileged process may have) costs ~2/3 of 512 KiB at 100 pairs (measured)
    pair_buffer_bytes: int = 2 * MIB
    #: optional: bytes one client address may relay per UTC day (both directions)
    max_bytes_per_address_per_day: int | None = None
    #: optional: bytes one pair may relay (both directions); then both closed
    max_bytes_per_transfer: int | None = None
    #: optional: bytes per second one connection may send (a token bucket, one second's
    #: worth of burst); the sender is slowed, never closed
    max_rate_bytes_per_second: int | None = None
    #: seconds `stop()` lets active pairs finish before closing them
    drain_timeout: float = 60.0
    #: seconds a closed-by-us connection may take to read its last bytes and our close
    #: once nothing more is waiting for it; then it is dropped
    close_timeout: float = 10.0
    #: `--blur-usage`: usage `started` rounded down to this many seconds and sizes
    #: rounded up, as the reference does (0: exact)
    blur_usage: int = 0
    #: seconds between checks of the timeouts (each check looks at every connection,
    #: so it is not run more often than the timeouts need)
    sweep_interval: float = 1.0
    #: how often repeated refusals of one kind are logged (then as a count)
    log_summary_interval: float = 60.0

    @property
    def direction_buffer_bytes(self) -> int:
        """The bound of one direction of a pair (half the pair's)."""
        return max(self.pair_buffer_bytes // 2, 4 * KIB)
