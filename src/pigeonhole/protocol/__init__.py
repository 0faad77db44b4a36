"""The mailbox protocol as plain Python: no sockets, no database, no clock.

A connection's `Session` takes one decoded client message and the time, changes the
shared in-memory `Rendezvous` state, and returns a `Step`: what to send at once (the
`ack`, errors), what to send only after the step's writes are committed, the writes
themselves (`effects`), and the `message` deliveries to subscribers. The server layer
does the I/O. Semantics follow the Magic Wormhole server protocol and the reference
server's behaviour (docs/architecture.md lists where we differ).
"""

from __future__ import annotations

from pigeonhole.protocol.channels import Rendezvous
from pigeonhole.protocol.errors import ProtocolError
from pigeonhole.protocol.session import Session, Step

__all__ = ["ProtocolError", "Rendezvous", "Session", "Step"]
