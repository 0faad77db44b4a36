"""The real wormhole clients the interop tests run: the Python `wormhole` and
wormhole-william (skipped when not installed), what they send (`Payload`), the codes they
are given (`Codes`) and one running client (`Client`, its output read from its files).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import re
import secrets
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from tests.support.process import BIN, InteropError, kill_tree, tail

WORMHOLE = BIN / "wormhole"
WORMHOLE_WILLIAM = shutil.which("wormhole-william")

Kind = Literal["py", "ww"]
KINDS: tuple[Kind, Kind] = ("py", "ww")
PAIRS: list[tuple[Kind, Kind]] = [(s, r) for s in KINDS for r in KINDS]

CLIENT_TIMEOUT = float(os.environ.get("PIGEONHOLE_INTEROP_TIMEOUT", "60"))
WRONG_CODE_TIMEOUT = 30.0
CODE_TIMEOUT = 20.0
FILE_SIZE = 1 << 20

CODE_RE = re.compile(r"Wormhole code is: (\S+)")
# Key-mismatch messages: Python `ERROR: Key confirmation failed ...`,
# wormhole-william `decrypt message failed`.
MISMATCH = {
    "py": re.compile(r"Key confirmation failed|WrongPasswordError"),
    "ww": re.compile(r"decrypt message failed"),
}
WORDS = (
    "adroitness",
    "aftermath",
    "almighty",
    "banjo",
    "beehive",
    "bookseller",
    "buzzard",
    "candidate",
    "caravan",
    "chatter",
    "cranky",
    "crowfoot",
    "dashboard",
    "dreadful",
    "eating",
    "egghead",
    "fallout",
    "flagpole",
    "gazelle",
    "glitter",
    "guitarist",
    "hamlet",
    "hydraulic",
    "involve",
    "kickoff",
    "liberty",
    "megaton",
    "midsummer",
    "nebula",
    "newborn",
    "orca",
    "oversight",
    "paperweight",
    "pioneer",
    "quadrant",
    "revenge",
    "rhythm",
    "scallion",
    "snapline",
    "spellbind",
    "tempest",
    "tonic",
    "unicorn",
    "upcoming",
    "vapor",
    "vocalist",
    "wallet",
    "yesteryear",
)


def require(*kinds: Kind) -> None:
    """Skip unless every client kind in `kinds` is installed."""
    if "ww" in kinds and WORMHOLE_WILLIAM is None:
        pytest.skip("wormhole-william is not installed (scripts/setup --test installs it)")


@dataclass
class Payload:
    text: str | None = None
    file: Path | None = None

    def send_args(self) -> list[str]:
        return ["--text", self.text] if self.text is not None else [str(self.file)]

    @property
    def sha256(self) -> str:
        assert self.file is not None
        return sha256_file(self.file)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def random_text() -> Payload:
    return Payload(text=f"pigeonhole-interop-{secrets.token_hex(12)}")


def random_file(directory: Path, size: int = FILE_SIZE) -> Payload:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"payload-{secrets.token_hex(4)}.bin"
    path.write_bytes(os.urandom(size))
    return Payload(file=path)


class Codes:
    """Chosen codes: a random nameplate in 1000-8999 per run, +1 per code.

    Far above what a server allocates (lowest free number), so chosen codes never
    meet allocated ones or another run's.
    """

    def __init__(self) -> None:
        self._rng = random.Random()
        self._base = self._rng.randint(1000, 8999)
        self._count = itertools.count()
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            n = 1000 + (self._base - 1000 + next(self._count)) % 8000
            words = self._rng.sample(WORDS, 2)
        return f"{n}-{words[0]}-{words[1]}"

    def words(self) -> str:
        with self._lock:
            a, b = self._rng.sample(WORDS, 2)
        return f"{a}-{b}"


@dataclass
class Client:
    label: str
    kind: Kind
    role: Literal["send", "receive"]
    proc: subprocess.Popen[bytes]
    cwd: Path
    out_path: Path
    err_path: Path
    timeout: float
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def wait_code(self, timeout: float = CODE_TIMEOUT) -> str:
        """The code the sender prints (Python: stderr, wormhole-william: stdout)."""
        deadline = time.monotonic() + timeout
        while True:
            m = CODE_RE.search(self.output)
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                raise InteropError(f"{self.describe()}\nexited before printing its code")
            if time.monotonic() > deadline:
                raise InteropError(f"{self.describe()}\nprinted no code within {timeout} s")
            time.sleep(0.05)

    def wait(self) -> int:
        """Wait for exit; the inner `timeout` ends it, the backstop kills by PID."""
        remaining = self.timeout + 10 - (time.monotonic() - self.started)
        try:
            rc = self.proc.wait(max(remaining, 0.1))
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            rc = self.proc.wait()
        if self.ended is None:
            self.ended = time.monotonic()
        return rc

    def kill(self) -> None:
        kill_tree(self.proc)

    def timed_out(self) -> bool:
        # `timeout` exits 124 (TERM worked) or 137 (-k KILL); our backstop gives -9
        return self.proc.returncode in (124, 137, -9)

    def mismatch(self) -> bool:
        return bool(MISMATCH[self.kind].search(self.output))

    def describe(self) -> str:
        rc = self.proc.poll()
        elapsed = (self.ended or time.monotonic()) - self.started
        state = f"exit {rc}" if rc is not None else "running"
        if rc is not None and self.timed_out():
            state += " (timed out)"
        return (
            f"--- {self.label} ({self.kind} {self.role}, {state}, {elapsed:.1f} s)\n"
            f"stdout:\n{tail(self.stdout)}\nstderr:\n{tail(self.stderr)}"
        )
