"""Errors a client causes; each becomes an `error` reply carrying `orig`."""

from __future__ import annotations


class ProtocolError(Exception):
    """The client's message was refused; the connection stays open."""

    def __init__(self, explain: str) -> None:
        super().__init__(explain)
        self.explain = explain


# Error strings, exactly as the reference server sends them (reference §2.3).
MUST_BIND_FIRST = "must bind first"
UNKNOWN_TYPE = "unknown type"
MISSING_TYPE = "missing 'type'"
ALREADY_BOUND = "already bound"
BIND_REQUIRES_APPID = "bind requires 'appid'"
BIND_REQUIRES_SIDE = "bind requires 'side'"
PING_REQUIRES_PING = "ping requires 'ping'"
GREEDY = "you already allocated one, don't be greedy"
CLAIM_REQUIRES_NAMEPLATE = "claim requires 'nameplate'"
ONE_CLAIM = "only one claim per connection"
ONE_RELEASE = "only one release per connection"
RELEASE_SAME_NAMEPLATE = "release and claim must use same nameplate"
RELEASE_FOLLOWS_CLAIM = "release without nameplate must follow claim"
ONE_OPEN = "only one open per connection"
OPEN_REQUIRES_MAILBOX = "open requires 'mailbox'"
ADD_NEEDS_OPEN = "must open mailbox before adding"
MISSING_PHASE = "missing 'phase'"
MISSING_BODY = "missing 'body'"
ONE_CLOSE = "only one close per connection"
CLOSE_SAME_MAILBOX = "open and close must use same mailbox"
CLOSE_FOLLOWS_OPEN = "close without mailbox must follow open"
CROWDED = "crowded"
RECLAIMED = "reclaimed"
NO_FREE_NAMEPLATE = "unable to find a free nameplate-id"

# Where the reference drops the connection, we answer with these instead (§2.6).
NOT_JSON = "message is not valid JSON"
NOT_OBJECT = "message must be a JSON object"
TYPE_NOT_STRING = "'type' must be a string"
TOO_DEEP = "message is nested too deeply"


def must_be_string(key: str) -> str:
    return f"'{key}' must be a string"
