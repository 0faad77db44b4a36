"""Effects as the JSON `channel.apply_batch` takes (schema/postgres-upgrade-v3-v4.sql).

Each effect becomes a row of writes, `[kind, field, ...]`; parts.py groups a batch's rows
into set-based statements, one per kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from pigeonhole.protocol import effects as fx
from pigeonhole.store.bodies import kept_as_text
from pigeonhole.store.postgres.parts import group


def encode_effects(effects: list[fx.Effect]) -> list[list[Any]]:
    """Effects as rows of writes, each `[kind, field, ...]` (parts.py groups them)."""
    return [_ENCODERS[type(e)](e) for e in effects]


def encode_batch(effects: list[fx.Effect]) -> str:
    """The batch as the JSON `channel.apply_batch` takes: its writes grouped in parts."""
    return encode_rows(encode_effects(effects))


def encode_rows(rows: list[list[Any]]) -> str:
    return orjson.dumps(group(rows)).decode()


def _message(e: fx.PutMessage) -> list[Any]:
    is_text = kept_as_text(e.body)
    return [
        "put_message", e.seq, e.app_id, e.mailbox_id, e.side, e.phase,
        e.body, is_text, e.server_rx, orjson.dumps(e.msg_id).decode(), e.owner,
    ]  # fmt: skip


_ENCODERS: dict[type, Callable[[Any], list[Any]]] = {
    # a plain INSERT: two nodes creating one nameplate collide, and one decides again
    fx.PutNameplate: lambda e: ["insert_nameplate", e.app_id, e.name, e.mailbox_id, e.owner],
    fx.DeleteNameplate: lambda e: ["delete_nameplate", e.app_id, e.name],
    fx.PutNameplateSide: lambda e: [
        "put_nameplate_side",
        e.app_id,
        e.name,
        e.side,
        e.claimed,
        e.added,
    ],
    fx.PutMailbox: lambda e: [
        "put_mailbox",
        e.app_id,
        e.mailbox_id,
        e.for_nameplate,
        e.created,
        e.owner,
    ],
    fx.DeleteMailbox: lambda e: ["delete_mailbox", e.app_id, e.mailbox_id],
    fx.PutMailboxSide: lambda e: [
        "put_mailbox_side",
        e.app_id,
        e.mailbox_id,
        e.side,
        e.opened,
        e.added,
        e.mood,
    ],
    fx.PutMessage: _message,
    fx.UsageNameplate: lambda e: [
        "usage_nameplate",
        e.app_id,
        e.started,
        e.waiting_time,
        e.total_time,
        e.result,
    ],
    fx.UsageMailbox: lambda e: [
        "usage_mailbox",
        e.app_id,
        e.for_nameplate,
        e.started,
        e.waiting_time,
        e.total_time,
        e.result,
    ],
    fx.UsageClientVersion: lambda e: [
        "usage_client_version",
        e.app_id,
        e.side,
        e.connect_time,
        e.implementation,
        e.version,
    ],
    fx.UsageConnectionCount: lambda e: [
        "usage_connection_count",
        e.sampled,
        e.connections,
        e.bound,
        e.subscribed,
        e.nameplates,
        e.mailboxes,
        e.rebooted,
        e.blur_time,
    ],
    fx.UsageTransit: lambda e: [
        "usage_transit",
        e.started,
        e.total_time,
        e.waiting_time,
        e.total_bytes,
        e.result,
    ],
}
