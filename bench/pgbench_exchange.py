"""The ceiling of a PostgreSQL server for Pigeonhole: pgbench running real exchanges.

One exchange's effects come from the protocol core itself (two sessions bind, claim,
open, add three messages each, release and close), encoded as the PostgreSQL store
encodes them for `channel.apply_batch`, one write at a time (version 2's form, still
taken: a node's own grouping, store/postgres/parts.py, would fold a whole exchange in one
transaction down to its deletes, which no real batch sees); pgbench then runs that
batch as one transaction per exchange, with fresh keys each time, at 1, 8 and 32
clients on a scratch database with Pigeonhole's schema, which is dropped afterwards.
Prints a markdown table (docs/scaling.md has the latest).

    .venv/bin/python bench/pgbench_exchange.py [--admin postgresql://postgres@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson

from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.protocol.effects import Effect, PutMessage
from pigeonhole.protocol.session import Session
from pigeonhole.store.postgres import encode_effects, schema_sql

APP = "lothar.com/wormhole/text-or-file-xfer"
#: stands for the nameplate in the template (a number, as the protocol requires)
NAMEPLATE = "424242"
MESSAGES = (("pake", "ab" * 40), ("version", "cd" * 150), ("0", "ef" * 200))


def exchange_effects() -> list[Effect]:
    """The effects of one two-sided exchange, in the order the server writes them."""
    rz = Rendezvous(Randomness(lambda xs: xs[0], lambda n: 0, lambda: "MAILBOX"))
    effects: list[Effect] = []
    a, b = (Session(rz, object(), owner="192.0.2.1") for _ in range(2))

    def send(s: Session, msg: dict[str, Any], now: float) -> None:
        effects.extend(s.receive(msg, now).effects)

    send(a, {"type": "bind", "appid": APP, "side": "SIDEA"}, 1.0)
    send(b, {"type": "bind", "appid": APP, "side": "SIDEB"}, 1.0)
    send(a, {"type": "claim", "nameplate": NAMEPLATE}, 1.1)
    send(b, {"type": "claim", "nameplate": NAMEPLATE}, 2.0)
    for s in (a, b):
        send(s, {"type": "open", "mailbox": "MAILBOX"}, 2.1)
    for s in (a, b):
        for i, (phase, body) in enumerate(MESSAGES):
            send(s, {"type": "add", "phase": phase, "body": body, "id": f"m{i}"}, 2.2)
    for s in (a, b):
        send(s, {"type": "release"}, 2.3)
        send(s, {"type": "close", "mailbox": "MAILBOX", "mood": "happy"}, 2.4)
    assert len(effects) == 22, [type(e).__name__ for e in effects]  # the server's count
    return effects


def pgbench_script(effects: list[Effect]) -> str:
    """The batch with pgbench variables for every key, so each run writes new rows."""
    text = orjson.dumps(encode_effects(effects)).decode()
    for name in ("MAILBOX", "SIDEA", "SIDEB"):
        text = text.replace(f'"{name}"', f'"{name.lower()}:n"')
    text = text.replace(f'"{NAMEPLATE}"', '":n"')  # nameplates are numbers
    seqs = sorted({e.seq for e in effects if isinstance(e, PutMessage)})
    for k, seq in enumerate(seqs):
        text = re.sub(rf'\["put_message",{seq},', f'["put_message",:s{k},', text)
    sets = ["\\set n random(1, 1000000000)"]
    sets += [f"\\set s{k} :n * {len(seqs)} + {k}" for k in range(len(seqs))]
    literal = text.replace("'", "''")
    return "\n".join([*sets, f"SELECT channel.apply_batch('{literal}'::jsonb);", ""])


async def execute(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def create(admin: str, name: str) -> str:
    """A scratch database with Pigeonhole's schema; its URL."""
    await execute(admin, f'CREATE DATABASE "{name}"')
    url = admin.rsplit("/", 1)[0] + "/" + name
    await execute(url, schema_sql("postgres-v1.sql"))
    await execute(url, schema_sql("postgres-upgrade-v1-v2.sql"))
    await execute(url, schema_sql("postgres-upgrade-v2-v3.sql"))
    return url


async def drop(admin: str, name: str) -> None:
    await execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    effects = exchange_effects()
    script = pgbench_script(effects)
    name = f"pigeonhole_pgbench_{os.getpid()}"
    url = asyncio.run(create(args.admin, name))
    size = len(orjson.dumps(encode_effects(effects)))
    print(f"one exchange: {len(effects)} effects, {size} bytes of JSON")
    print("\n| pgbench clients | exchanges/s (one transaction each) | mean latency |")
    print("|---|---|---|")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "exchange.sql"
            path.write_text(script)
            for clients in (int(c) for c in args.clients.split(",")):
                out = subprocess.run(
                    ["pgbench", "-n", "-f", str(path), "-c", str(clients), "-j", "2",
                     "-T", str(args.seconds), url],
                    capture_output=True, text=True, check=True, timeout=args.seconds + 120,
                ).stdout  # fmt: skip
                tps = re.search(r"tps = ([\d.]+)", out)
                latency = re.search(r"latency average = ([\d.]+) ms", out)
                assert tps and latency, out
                print(f"| {clients} | {float(tps[1]):,.0f} | {latency[1]} ms |")
    finally:
        asyncio.run(drop(args.admin, name))


if __name__ == "__main__":
    main()
