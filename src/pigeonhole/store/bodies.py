"""How a message body is kept, the same rule in every backend (and the reference import).

Bodies are hex on the wire and stored as the bytes their hex spells (half the space); a
body with capitals, which no real client sends, stays the text sent, so it comes back
verbatim as the reference echoes it.
"""

from __future__ import annotations


def kept_as_text(body: str) -> bool:
    """Whether a hex body is stored as the text sent (capitals, or empty), not as bytes."""
    return not (body.islower() or body.isdigit())


def stored_body(body: str) -> bytes | str:
    """The bytes a hex body spells; a body with capitals stays text, to come back verbatim.

    Every real client sends lowercase (or digits only); the reference echoes whatever
    case it got, so a body in capitals is kept as sent (SQLite stores either in the column).
    """
    return body if kept_as_text(body) else bytes.fromhex(body)
