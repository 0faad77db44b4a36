"""What the core asks of a connection, whatever carries it (TCP socket or WebSocket)."""

from __future__ import annotations

import typing


class Endpoint(typing.Protocol):
    """One client connection as the relay drives it."""

    def write(self, data: bytes) -> None:
        """Queue bytes for the client (a reply line or the partner's bytes)."""

    def write_pieces(self, pieces: list[bytes], size: int) -> None:
        """Queue several pieces of `size` bytes in all, as `write` would their join."""

    def finish(self) -> None:
        """Close once every queued byte has gone; the client sees EOF (or a close frame)."""

    def abort(self) -> None:
        """Drop the connection now, whatever is queued."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def buffered(self) -> int:
        """Bytes queued for the client and not yet handed to the kernel."""
