"""The protocol core's CPU per exchange beside a crowd of waiting senders, in one process.

    .venv/bin/python bench/crowd_core.py
    .venv/bin/python bench/crowd_core.py --variant before=/tmp/a/src --variant after=/tmp/b/src

bench/crowd.py measures the whole server, which on a shared 2-core machine moves with the
other work on it. This measures only what the crowd could make grow inside the protocol
core (protocol/: sessions, the rendezvous, allocation, closing), with no I/O: one process
per variant and crowd size builds the crowd through `Session`s (bind, allocate, claim,
open, add `pake`), then runs complete two-sided exchanges one after another (bind,
allocate, claim, open, pake, release, version, one message each way, close) and reads
its own CPU time (`time.process_time`, the collector included) over them. Variants and
crowd sizes alternate, each measured --repeat times; the medians and the ratio to no
crowd are printed (one JSON line per measurement with --json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import gc, itertools, json, random, sys, time
from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.protocol.session import Session

crowd, exchanges, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
ids = itertools.count()
rz = Rendezvous(Randomness(rng.choice, rng.randrange, lambda: f"mb{next(ids):011d}"))
APP = "lothar.com/wormhole/text-or-file-xfer"
now = 1_000.0
gc.collect()
gc.freeze()  # as the server does once it has started: the crowd comes after

def bound(side):
    s = Session(rz, object())  # nobody's: no quota per address
    s.receive({"type": "bind", "appid": APP, "side": side}, now)
    return s

def named(step, kind, key):
    return next(f[key] for f in step.after_commit if f.get("type") == kind)

held = []
for i in range(crowd):
    s = bound(f"c{i}")
    name = named(s.receive({"type": "allocate"}, now), "allocated", "nameplate")
    mb = named(s.receive({"type": "claim", "nameplate": name}, now), "claimed", "mailbox")
    s.receive({"type": "open", "mailbox": mb}, now)
    s.receive({"type": "add", "phase": "pake", "body": "ab" * 40}, now)
    held.append(s)

def exchange(n):
    a, b = bound(f"a{n}"), bound(f"b{n}")
    name = named(a.receive({"type": "allocate"}, now), "allocated", "nameplate")
    mb = named(a.receive({"type": "claim", "nameplate": name}, now), "claimed", "mailbox")
    b.receive({"type": "claim", "nameplate": name}, now)
    for s in (a, b):
        s.receive({"type": "open", "mailbox": mb}, now)
        s.receive({"type": "add", "phase": "pake", "body": "ab" * 40}, now)
    for s in (a, b):
        s.receive({"type": "release", "nameplate": name}, now)
        s.receive({"type": "add", "phase": "version", "body": "cd" * 150}, now)
        s.receive({"type": "add", "phase": "0", "body": "ef" * 200}, now)
    for s in (a, b):
        s.receive({"type": "close", "mailbox": mb, "mood": "happy"}, now)

for n in range(200):  # warm-up
    exchange(-n - 1)
c0 = time.process_time()
for n in range(exchanges):
    exchange(n)
c1 = time.process_time()
nameplates, mailboxes = rz.counts()
print(json.dumps({"crowd": crowd, "us_per_exchange": 1e6 * (c1 - c0) / exchanges,
                  "nameplates": nameplates, "mailboxes": mailboxes,
                  "gc": [s["collections"] for s in gc.get_stats()]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=SRC")
    ap.add_argument("--crowds", default="0,2000,8000,15000")
    ap.add_argument("--exchanges", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    repo_src = Path(__file__).resolve().parent.parent / "src"
    variants = [tuple(v.split("=", 1)) for v in args.variant] or [("checkout", str(repo_src))]
    crowds = [int(c) for c in args.crowds.split(",")]
    found: dict[tuple[str, int], list[float]] = {}
    for r in range(args.repeat):
        order = variants if r % 2 == 0 else variants[::-1]
        for name, src in order:
            for crowd in crowds:
                env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(crowd), str(args.exchanges), str(r)],
                    env=env, capture_output=True, text=True, timeout=900, check=True,
                )  # fmt: skip
                result = json.loads(out.stdout)
                found.setdefault((name, crowd), []).append(result["us_per_exchange"])
                if args.json:
                    print(json.dumps({"variant": name, "round": r, **result}), flush=True)
    print("| variant | crowd | core CPU per exchange (median) | ratio to no crowd | runs |")
    print("|---|---|---|---|---|")
    for name, _ in variants:
        alone = statistics.median(found[(name, crowds[0])])
        for crowd in crowds:
            runs = found[(name, crowd)]
            med = statistics.median(runs)
            spread = ", ".join(f"{x:.0f}" for x in runs)
            print(f"| {name} | {crowd:,} | {med:.0f} µs | {med / alone:.2f}x | {spread} |")


if __name__ == "__main__":
    main()
