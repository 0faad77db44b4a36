"""Helpers for the pure protocol tests: deterministic randomness, no I/O."""

from __future__ import annotations

import itertools
import random

from pigeonhole.protocol.channels import Randomness, Rendezvous
from pigeonhole.protocol.session import Session


def fake_randomness(seed: int = 1) -> Randomness:
    rng = random.Random(seed)
    counter = itertools.count(1)
    return Randomness(rng.choice, rng.randrange, lambda: f"mbox{next(counter):09d}")


def bound(rz: Rendezvous, side: str, app: str = "app1", **kw: object) -> Session:
    s = Session(rz, object(), **kw)  # type: ignore[arg-type]
    step = s.receive({"type": "bind", "appid": app, "side": side}, 0.0)
    assert [f["type"] for f in step.immediate] == ["ack"]
    return s
