"""The page and wormhole-william (Debian's Go client).

- page -> `wormhole-william receive`: the Go receiver uses the sender's relay hints, and the
  page's `relay-v1` hint names our TCP relay, so it runs on the host's loopback.
- `wormhole-william send` -> page: the Go sender ignores every relay but its hard-wired
  `transit.magic-wormhole.io:4001`, so it runs in a private namespace where that name is
  127.0.0.1 and port 4001 is forwarded to our relay (as tests/interop does). Without
  such a mapping this direction cannot work: docs/web.md says so for operators.

wormhole-william's SPAKE2 (gospake2) encodes a point wrongly about once in 256 exchanges,
and both sides then see a wrong code although it was right (browser-client-notes.md §10):
a pair that fails that way on both sides is retried once, with a fresh code, and says so.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.netns import Net
from tests.support.process import kill_tree
from tests.support.relay import ServedRelay, wait_for_happy
from tests.support.wormhole_clients import WORMHOLE_WILLIAM
from tests.web.web_support import CODE_RE, MIB, PageFailed, WebPage, random_file, sha256_file

FILE_SIZE = 10 * MIB
TIMEOUT = 120.0
WW_MISMATCH = re.compile(r"decrypt message failed")

pytestmark = [pytest.mark.interop, pytest.mark.slow]


class WwRun:
    """One wormhole-william process (under `timeout`), its output in files."""

    def __init__(self, argv: list[str], cwd: Path, wrap: Callable[[list[str], Path], list[str]]):
        cwd.mkdir(parents=True)
        self.cwd = cwd
        self.out, self.err = cwd / "stdout.log", cwd / "stderr.log"
        stdin = cwd / "stdin.txt"
        stdin.write_text("y\n")  # the receiver asks `ok? (y/N):` before it accepts a file
        full = ["timeout", "-k", "5", f"{TIMEOUT:g}", *argv]
        with open(stdin, "rb") as i, open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen(wrap(full, cwd), cwd=cwd, stdin=i, stdout=o, stderr=e)

    @property
    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def wait(self) -> int:
        try:
            return self.proc.wait(TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            return self.proc.wait()

    def wait_code(self, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while not (m := CODE_RE.search(self.output)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"wormhole-william printed no code:\n{self.output}")
            time.sleep(0.05)
        return m.group(1)

    def mismatch(self) -> bool:
        return bool(WW_MISMATCH.search(self.output))

    def describe(self) -> str:
        return f"wormhole-william (exit {self.proc.poll()}) in {self.cwd}:\n{self.output[-2000:]}"


def ww_path() -> str:
    if WORMHOLE_WILLIAM is None:
        pytest.skip("wormhole-william is not installed (scripts/setup --test installs it)")
    return WORMHOLE_WILLIAM


def on_host(argv: list[str], cwd: Path) -> list[str]:
    return argv


def retried(label: str, attempt: Callable[[str], Any]) -> Any:
    """`attempt(suffix)`; once more if it raised `KeyMismatch` (the gospake2 quirk)."""
    try:
        return attempt("first")
    except KeyMismatch as why:
        print(f"# {label}: key mismatch on both sides ({why}), retrying once", file=sys.stderr)
        return attempt("retry")


class KeyMismatch(Exception):
    """Both the page and wormhole-william said the code was wrong, with the right code."""


def test_web_e2e_page_sends_file_to_ww(
    context: Any, base_url: str, web_server: ServedRelay, tmp_path: Path
) -> None:
    ww = ww_path()
    source = random_file(tmp_path / "source", FILE_SIZE, name="to-william.bin")
    since = len(web_server.records())

    def attempt(label: str) -> WwRun:
        page = WebPage.open(context, base_url)
        code = page.send_file(source)
        mailbox = web_server.server.url
        run = WwRun([ww, "--relay-url", mailbox, "receive", "--hide-progress", code],
                    tmp_path / label, on_host)  # fmt: skip
        status = run.wait()
        try:
            page.wait_state("done", timeout=30)
        except PageFailed as failed:
            if run.mismatch():
                raise KeyMismatch(str(failed)) from failed
            raise AssertionError(f"{failed}\n{run.describe()}") from failed
        assert status == 0, run.describe()
        return run

    run = retried("page->ww", attempt)
    got = run.cwd / source.name
    assert got.exists(), run.describe()
    assert sha256_file(got) == sha256_file(source)
    wait_for_happy(web_server.records, since, FILE_SIZE)


def test_web_e2e_ww_sends_file_to_page(
    context: Any, base_url: str, web_server: ServedRelay, ww_net: Net, tmp_path: Path
) -> None:
    ww = ww_path()
    source = random_file(tmp_path / "source", FILE_SIZE, name="from-william.bin")
    since = len(web_server.records())
    mailbox = ww_net.mailbox_url(web_server.server)  # forwarded into the namespace

    def attempt(label: str) -> tuple[WwRun, Path]:
        page = WebPage.open(context, base_url)
        run = WwRun([ww, "--relay-url", mailbox, "send", "--hide-progress", str(source)],
                    tmp_path / label, ww_net.wrap)  # fmt: skip
        try:
            got = page.receive_file(run.wait_code(), tmp_path / label / "got", timeout=TIMEOUT)
        except PageFailed as failed:
            if run.wait() != 0 and run.mismatch():
                raise KeyMismatch(str(failed)) from failed
            raise AssertionError(f"{failed}\n{run.describe()}") from failed
        assert run.wait() == 0, run.describe()
        return run, got

    _run, got = retried("ww->page", attempt)
    assert got.name == source.name
    assert sha256_file(got) == sha256_file(source)
    wait_for_happy(web_server.records, since, FILE_SIZE)
