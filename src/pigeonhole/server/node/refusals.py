"""Commands a node refuses before deciding them, and the step that answers a refusal.

PostgreSQL text cannot hold U+0000: a command carrying one is refused when it is queued,
not by a failed batch. It stays in its connection's queue as a marker (`REFUSE`), so its
`error` leaves in order with the replies to the commands around it.
"""

from __future__ import annotations

from typing import Any

from pigeonhole.protocol.session import Step, error_frame

#: the type of a queued command already refused (never decided)
REFUSE = " refused"
NUL_REFUSED = "strings may not contain U+0000 on this server"
#: the `error` of a command the database refused for its content
NOT_STORED = "server could not store this command"


def screened(msg: dict[str, Any], frame: str | bytes) -> dict[str, Any]:
    """The command as queued: itself, or a refusal marker when it holds a U+0000."""
    # JSON can only spell U+0000 as an escape: most frames are not walked at all
    escaped = "\\u0000" in frame if isinstance(frame, str) else b"\\u0000" in frame
    if escaped and _has_nul(msg):
        return {"type": REFUSE, "orig": msg, "error": NUL_REFUSED}
    return msg


def refusal(msg: dict[str, Any], explain: str) -> Step:
    """The step that answers a refused command: its `ack`, then the `error`."""
    step = Step()
    step.immediate.append({"type": "ack", "id": msg.get("id")})
    step.immediate.append(error_frame(explain, msg))
    return step


def _has_nul(value: object, depth: int = 0) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if depth > 8:
        return False
    if isinstance(value, dict):
        return any(_has_nul(k, depth + 1) or _has_nul(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v, depth + 1) for v in value)
    return False
