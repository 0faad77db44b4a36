"""`channel.apply_batch` on the real PostgreSQL: the grouped parts a node sends
(store/postgres/parts.py) and version 2's array of single writes (a node not yet upgraded) both
leave what applying every write in turn leaves, notifications included, in order."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson

from pigeonhole.store.postgres import schema_sql
from pigeonhole.store.postgres.parts import group
from tests.store.batch_model import State, apply_row, empty, random_batch
from tests.support.postgres import postgres_url, run

__all__ = ["postgres_url"]

SCHEMA = (
    "postgres-v1.sql",
    "postgres-upgrade-v1-v2.sql",
    "postgres-upgrade-v2-v3.sql",
    "postgres-upgrade-v3-v4.sql",
    "postgres-upgrade-v4-v5.sql",
    "postgres-upgrade-v5-v6.sql",
)
TABLES = "channel.nameplates, channel.nameplate_sides, channel.mailboxes, " + (
    "channel.mailbox_sides, channel.messages, usage.nameplates, usage.transit"
)


async def _read(conn: Any) -> State:
    state = empty()
    for r in await conn.fetch("SELECT * FROM channel.nameplates"):
        state["nameplates"][(r["app_id"], r["name"])] = (r["mailbox_id"], r["owner"])
    for r in await conn.fetch("SELECT * FROM channel.nameplate_sides"):
        key = (r["app_id"], r["name"], r["side"])
        state["nameplate_sides"][key] = (r["claimed"], r["added"])
    for r in await conn.fetch("SELECT * FROM channel.mailboxes"):
        row = (r["for_nameplate"], r["created"], r["owner"], r["updated"])
        state["mailboxes"][(r["app_id"], r["id"])] = row
    for r in await conn.fetch("SELECT * FROM channel.mailbox_sides"):
        key = (r["app_id"], r["mailbox_id"], r["side"])
        state["mailbox_sides"][key] = (r["opened"], r["added"], r["mood"])
    for r in await conn.fetch("SELECT * FROM channel.messages"):
        body = bytes(r["body"])
        text = body.decode() if r["body_is_text"] else body.hex()
        state["messages"][r["seq"]] = (
            *(r["app_id"], r["mailbox_id"], r["side"], r["phase"], text),
            *(r["body_is_text"], r["server_rx"], r["msg_id"], r["owner"]),
        )
    rows = await conn.fetch(
        "SELECT app_id, started, waiting_time, total_time, result FROM usage.nameplates ORDER BY id"
    )
    state["usage_nameplates"] = [tuple(r) for r in rows]
    rows = await conn.fetch(
        "SELECT started, total_time, waiting_time, total_bytes, result FROM usage.transit"
        " ORDER BY id"
    )
    state["usage_transit"] = [tuple(r) for r in rows]
    return state


def test_both_forms_of_a_batch_leave_what_each_write_in_turn_leaves(postgres_url: str) -> None:
    async def check() -> None:
        conn = await asyncpg.connect(postgres_url)
        listener = await asyncpg.connect(postgres_url)
        notified: list[str] = []
        try:
            for name in SCHEMA:
                await conn.execute(schema_sql(name))
            await listener.add_listener("pigeonhole", lambda *a: notified.append(a[3]))
            rng = random.Random(7)
            seqs = [0]
            for _ in range(25):
                rows = random_batch(rng, rng.randint(10, 60), seqs)
                expected = empty()
                for row in rows:
                    apply_row(expected, row)
                for form in (group(rows), rows):
                    await conn.execute(f"TRUNCATE {TABLES}")
                    notified.clear()
                    await conn.execute(
                        "SELECT channel.apply_batch($1::jsonb)", orjson.dumps(form).decode()
                    )
                    for _ in range(100):  # the notifications arrive after the commit
                        if len(notified) == len(expected["notify"]):
                            break
                        await asyncio.sleep(0.01)
                    found = await _read(conn)
                    found["notify"] = list(notified)
                    assert found == expected, (form, rows)
        finally:
            await listener.close()
            await conn.close()

    run(check)
