"""Drive the browser page end to end: Debian's Chromium through Playwright, the page only
through its `data-testid` automation contract, and the real CLIs beside it.

- `chromium`: Debian's /usr/bin/chromium (never a downloaded browser), headless, with the
  flags this machine needs (and a test's own), a DevTools port of its own (for
  `HeapProbe`), and downloads accepted into a directory of the test's.
- `WebPage`: one tab of the page (`send_text`, `send_file`, `receive`, `state`, ...).
- `Cli`: the Python `wormhole` CLI with `--no-listen`, so the relay carries the bytes.
- `HeapProbe`: `Runtime.getHeapUsage` of every page and worker target of the browser,
  sampled while a transfer runs (its backing-store size counts the bytes of byte arrays,
  which `Performance.getMetrics` does not).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.chromium import BASE_FLAGS
from tests.support.process import kill_tree
from tests.support.wormhole_clients import sha256_file as sha256_file  # the tests share one

CHROMIUM = Path("/usr/bin/chromium")
#: the suite's one list of flags (tests/support/chromium.py; Playwright adds --headless)
CHROMIUM_FLAGS = BASE_FLAGS
MIB = 1 << 20
APPID = "lothar.com/wormhole/text-or-file-xfer"
#: what the CLI prints once the code is allocated (Python CLI: on stderr)
CODE_RE = re.compile(r"Wormhole code is: (\S+)")
#: a code as the page shows it: nameplate, then two or more words
PAGE_CODE_RE = re.compile(r"^\d+(-[a-z]+){2,}$")
#: the CLI's own wrong-code message (the same regex as tests/interop)
CLI_MISMATCH = re.compile(r"Key confirmation failed|WrongPasswordError")


def random_file(directory: Path, size: int, name: str = "") -> Path:
    """`size` random bytes in a file (written 1 MiB at a time)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"payload-{secrets.token_hex(4)}.bin")
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, MIB)
            f.write(os.urandom(n))
            left -= n
    return path


def finished_mailboxes(usage_db: Path, result: str = "happy") -> int:
    """Mailboxes of the file-transfer AppID that the server's usage records as `result` (a
    row is written when every side has closed the mailbox)."""
    with contextlib.closing(sqlite3.connect(usage_db)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM mailboxes WHERE app_id = ? AND result = ?", (APPID, result)
        ).fetchone()
    return int(count)


def wait_for_mailboxes(
    usage_db: Path, at_least: int, timeout: float = 15.0, result: str = "happy"
) -> int:
    deadline = time.monotonic() + timeout
    while (count := finished_mailboxes(usage_db, result)) < at_least:
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} {result} mailboxes in the usage records, not {at_least}")
        time.sleep(0.1)
    return count


def random_text() -> str:
    return f"pigeonhole-web-{secrets.token_hex(12)}"


# ------------------------------------------------------------------------- the browser


@contextlib.contextmanager
def chromium(downloads: Path, debug_port: int, extra: Sequence[str] = ()) -> Iterator[Any]:
    """Debian's Chromium under Playwright, headless, downloads into `downloads`, DevTools on
    `debug_port`, with the `extra` flags a test needs; closed at the end.

    Playwright makes a fresh temporary profile (user-data dir) for every launch."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra installs it")
    if not CHROMIUM.exists():
        pytest.skip(f"no {CHROMIUM} (Debian package `chromium`)")
    downloads.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*CHROMIUM_FLAGS, f"--remote-debugging-port={debug_port}", *extra],
            downloads_path=str(downloads),
        )
        try:
            yield browser
        finally:
            browser.close()


#: the page's transit worker script, as a Playwright route pattern
WORKER_SCRIPT = "**/web/transit-worker.js"
#: headers of the served script that do not hold for its test build's body
LENGTH_HEADERS = {"content-length", "content-encoding", "etag"}
PROBE_BUILDER = Path(__file__).resolve().parents[2] / "web" / "testing" / "build-probe.mjs"


@functools.cache
def worker_probe() -> bytes:
    """The test-only build of the transit worker (web/testing/transit-worker-probe.js): the
    shipped worker's modules, which also set `self.box` and `self.carried` for the tests."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no `node` to build the transit worker's test build")
    with tempfile.TemporaryDirectory(prefix="transit-worker-probe-") as tmp:
        out = Path(tmp) / "transit-worker.js"
        subprocess.run([node, str(PROBE_BUILDER), str(out)], check=True, timeout=120)
        return out.read_bytes()


def serve_worker_probe(
    route: Any, headers: Callable[[dict[str, str]], dict[str, str]] = dict
) -> None:
    """Answers a request for the transit worker with its test build, under the served
    script's own headers (its Content-Security-Policy applies to the worker), as `headers`
    rewrites them."""
    response = route.fetch()
    own = {k: v for k, v in response.headers.items() if k not in LENGTH_HEADERS}
    route.fulfill(response=response, headers=headers(own), body=worker_probe())


#: a browser whose pages get made-up responses (routed, fulfilled) needs these: such a
#: response comes from no address, so Local Network Access checks would block what the
#: document or worker it made opens on loopback (the mailbox, the relay)
ROUTED_FLAGS = ("--disable-features=LocalNetworkAccessChecks",)


def probe_transit_worker(context: Any) -> None:
    """Pages of `context` run the transit worker's test build (see `WebPage.transit_carried`);
    the browser needs `ROUTED_FLAGS`."""
    # a handler of two parameters would be given the request as the second
    context.route(WORKER_SCRIPT, lambda route: serve_worker_probe(route))


#: the automation contract's `data-testid`s (docs/web.md)
TESTIDS = (
    "send-text",
    "send-file",
    "send-folder",
    "send-button",
    "code",
    "code-link",
    "receive-code",
    "receive-button",
    "accept-button",
    "received-text",
    "transfer",
)


class PageFailed(AssertionError):
    """The page reached `failed` where it should not have (the message says what it showed)."""


@dataclass
class WebPage:
    """One tab of the page, used only through the automation contract (`data-testid`)."""

    page: Any
    base_url: str

    @classmethod
    def open(cls, context: Any, base_url: str) -> WebPage:
        page = context.new_page()
        page.goto(base_url + "/")
        web = cls(page, base_url)
        web.by_id("transfer").wait_for(state="attached")
        return web

    def by_id(self, testid: str) -> Any:
        return self.page.get_by_test_id(testid)

    def transit_worker(self) -> Any:
        workers = [w for w in self.page.workers if w.url.endswith("/web/transit-worker.js")]
        assert len(workers) == 1, f"one transit worker, not {[w.url for w in self.page.workers]}"
        return workers[0]

    def transit_carried(self) -> dict[str, int]:
        """Plaintext bytes the page's transit worker sealed (`sent`) and opened (`received`)
        over this tab's transfers: shows the relay's bytes went through the worker. Only
        where the worker is its test build (`probe_transit_worker`)."""
        return dict(self.transit_worker().evaluate("self.carried"))

    def transit_box(self) -> str:
        """Which library seals the transit worker's records: "libsodium" (its WebAssembly,
        which the page's CSP must allow) or "@noble/ciphers" (the plain-JS fallback). Only
        where the worker is its test build (`probe_transit_worker`)."""
        return str(self.transit_worker().evaluate("self.box"))

    # -- state

    def state(self) -> str:
        transfer = self.by_id("transfer")
        if transfer.count() == 0:  # the tab navigated away from the page
            shown = self.page.evaluate("document.body ? document.body.innerText : ''")
            raise AssertionError(f"the tab left the page: now at {self.page.url}: {shown[:300]!r}")
        return str(transfer.get_attribute("data-state") or "")

    def message(self) -> str:
        """What the page says about the transfer: the `transfer` element's visible text and
        any alert on the page."""
        parts = [self.by_id("transfer").inner_text()]
        alerts = self.page.locator("[role=alert]:visible")
        parts += [alerts.nth(i).inner_text() for i in range(alerts.count())]
        return "\n".join(p.strip() for p in parts if p.strip())

    def wait_state(self, *states: str, timeout: float = 60.0) -> str:
        """Wait until `data-state` is one of `states` (or `failed`, which raises unless asked
        for); the state reached."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.state()
            if now in states:
                return now
            if now == "failed":
                raise PageFailed(f"the page failed: {self.message()!r}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the page stayed {now!r}, not {states} in {timeout:g} s: {self.message()!r}"
                )
            self.page.wait_for_timeout(100)

    # -- sending

    def send_text(self, text: str) -> str:
        """Type `text`, press send; the code the page shows."""
        self.by_id("send-text").fill(text)
        self.by_id("send-button").click()
        return self.code()

    def send_file(self, path: Path) -> str:
        """Pick `path` in the file input, press send; the code the page shows."""
        self.by_id("send-file").set_input_files(str(path))
        self.by_id("send-button").click()
        return self.code()

    def code(self, timeout: float = 20.0) -> str:
        """The code, once the page has allocated one."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.by_id("code").inner_text().strip()
            if PAGE_CODE_RE.match(shown):
                return shown
            if self.state() == "failed" or time.monotonic() > deadline:
                raise AssertionError(
                    f"no code shown (code {shown!r}, state {self.state()!r}): {self.message()!r}"
                )
            self.page.wait_for_timeout(50)

    # -- receiving

    def enter_code(self, code: str) -> None:
        self.by_id("receive-code").fill(code)
        self.by_id("receive-button").click()

    def receive_text(self, code: str, timeout: float = 60.0) -> str:
        self.enter_code(code)
        self.wait_state("done", timeout=timeout)
        return str(self.by_id("received-text").inner_text())

    def accept_offer(self, timeout: float = 60.0) -> Any:
        """Wait for the offer, accept it: the Playwright Download that follows."""
        accept = self.by_id("accept-button")
        deadline = time.monotonic() + timeout
        while not accept.is_visible():
            if self.state() == "failed":
                raise PageFailed(f"the page failed before the offer: {self.message()!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no offer shown in {timeout:g} s: {self.message()!r}")
            self.page.wait_for_timeout(50)
        started: list[Any] = []
        self.page.once("download", lambda d: started.append(d))
        accept.click()
        while not started:  # the download starts once the first bytes are decrypted
            if self.state() == "failed":
                raise PageFailed(f"the page failed before the download: {self.message()!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no download started in {timeout:g} s: {self.message()!r}")
            self.page.wait_for_timeout(50)
        return started[0]

    def receive_file(self, code: str, into: Path, timeout: float = 120.0) -> Path:
        """Enter `code`, accept the offer, wait for `done`: the downloaded file, moved into
        `into` under the name the page gave it."""
        self.enter_code(code)
        download = self.accept_offer(timeout)
        self.wait_state("done", timeout=timeout)
        return save_download(download, into)


def save_download(download: Any, into: Path) -> Path:
    """Wait for the download to finish; it, moved to `into`/its suggested name."""
    failure = download.failure()
    if failure is not None:
        raise AssertionError(f"the download failed: {failure}")
    into.mkdir(parents=True, exist_ok=True)
    target = into / download.suggested_filename
    download.save_as(str(target))
    return target


# ------------------------------------------------------------------------------ the CLI


@dataclass
class Cli:
    """The Python `wormhole` CLI against one server: `--no-listen` and our relay as its
    transit helper, so the bytes can only go through our relay."""

    mailbox: str
    relay_port: int
    workdir: Path
    timeout: float = 120.0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _argv(self, *args: str) -> list[str]:
        wormhole = Path(sys.executable).parent / "wormhole"
        if not wormhole.exists():
            pytest.skip(f"the Python wormhole client is not installed ({wormhole})")
        return [
            "timeout", "-k", "5", f"{self.timeout:g}", str(wormhole),
            "--relay-url", self.mailbox,
            "--transit-helper", f"tcp:127.0.0.1:{self.relay_port}",
            *args,
        ]  # fmt: skip

    def start(self, name: str, *args: str) -> CliRun:
        cwd = self.workdir / name
        cwd.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        out, err = cwd / "stdout.log", cwd / "stderr.log"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(
                self._argv(*args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=o, stderr=e, env=env
            )
        self.procs.append(proc)
        return CliRun(proc, cwd, out, err)

    def send(self, *what: str, code: str | None = None, name: str = "send") -> CliRun:
        """`wormhole send --no-listen` of a text (`--text T`) or a file path."""
        chosen = ["--code", code] if code else []
        return self.start(name, "send", "--no-listen", "--hide-progress", "--no-qr", *chosen, *what)

    def receive(self, code: str, *, file: bool, name: str = "receive") -> CliRun:
        accept = ["--accept-file", "-o", "received.bin"] if file else []
        return self.start(name, "receive", "--no-listen", "--hide-progress", *accept, code)

    def close(self) -> None:
        for proc in self.procs:
            kill_tree(proc)


@dataclass
class CliRun:
    proc: subprocess.Popen[bytes]
    cwd: Path
    out_path: Path
    err_path: Path

    @property
    def output(self) -> str:
        out, err = self.out_path, self.err_path
        return out.read_text(errors="replace") + err.read_text(errors="replace")

    @property
    def received(self) -> Path:
        return self.cwd / "received.bin"

    def wait(self, timeout: float = 180.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            return self.proc.wait()

    def wait_code(self, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            if m := CODE_RE.search(self.output):
                return m.group(1)
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the CLI printed no code:\n{self.describe()}")
            time.sleep(0.05)

    def describe(self) -> str:
        return f"wormhole (exit {self.proc.poll()}) in {self.cwd}:\n{self.output[-2000:]}"

    def check(self, timeout: float = 180.0) -> None:
        """It exits 0 (else the assertion shows its output)."""
        assert self.wait(timeout) == 0, self.describe()


# ---------------------------------------------------------------------------- memory


@dataclass
class HeapPeak:
    """What `HeapProbe` saw: per sample, the sum over targets of used JS heap plus backing
    store (the bytes of ArrayBuffers, garbage not yet collected included); every
    `collect_every`-th sample also after a forced collection (what the page really holds)."""

    samples: int = 0
    peak_total: int = 0
    peak_by_target: dict[str, int] = field(default_factory=dict)
    last: dict[str, dict[str, int]] = field(default_factory=dict)
    #: every sample's sum over targets, in order
    series: list[int] = field(default_factory=list)
    #: the sums right after a forced garbage collection, in order
    held: list[int] = field(default_factory=list)


class HeapProbe:
    """Samples every page, service worker and worker target of `origin` through Chromium's
    DevTools port (a second DevTools client beside Playwright's; targets come and go)."""

    TYPES = ("page", "service_worker", "worker", "shared_worker")

    def __init__(self, debug_port: int, origin: str, collect_every: int = 8) -> None:
        self.debug_port = debug_port
        self.origin = origin
        self.collect_every = collect_every
        self._sockets: dict[str, Any] = {}
        self._stack = contextlib.ExitStack()
        self._ids = iter(range(1, 1 << 30))
        self.peak = HeapPeak()

    def _targets(self) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.debug_port}/json/list"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=5) as answer:
            found: list[dict[str, Any]] = json.load(answer)
        return [
            t for t in found if t.get("type") in self.TYPES
            and str(t.get("url", "")).startswith(self.origin)
            and t.get("webSocketDebuggerUrl")
        ]  # fmt: skip

    def _call(self, target: dict[str, Any], method: str) -> dict[str, Any]:
        from websockets.sync.client import connect

        key = str(target["id"])
        sock = self._sockets.get(key)
        if sock is None:
            opened = connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=5)
            sock = self._sockets[key] = self._stack.enter_context(opened)
        call_id = next(self._ids)
        sock.send(json.dumps({"id": call_id, "method": method}))
        while True:
            reply = json.loads(sock.recv(timeout=10))
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def _usage(self, target: dict[str, Any], collect: bool) -> dict[str, int] | None:
        try:
            if collect:
                self._call(target, "HeapProfiler.collectGarbage")
            usage = self._call(target, "Runtime.getHeapUsage")
        except (OSError, RuntimeError, TimeoutError):
            # a target that just went away (a finished download's worker, say)
            self._sockets.pop(str(target["id"]), None)
            return None
        return {k: int(v) for k, v in usage.items()}

    def sample(self) -> int:
        """One sample of every target (and, every `collect_every`-th, one more after a
        forced collection); the first sum over targets (bytes)."""
        targets = self._targets()
        total = 0
        for target in targets:
            label = f"{target['type']} {target['url']}"
            usage = self._usage(target, collect=False)
            if usage is None:
                continue
            used = usage.get("usedSize", 0) + usage.get("backingStorageSize", 0)
            self.peak.last[label] = usage
            self.peak.peak_by_target[label] = max(self.peak.peak_by_target.get(label, 0), used)
            total += used
        if self.peak.samples % self.collect_every == 0:
            held = [self._usage(t, collect=True) for t in targets]
            self.peak.held.append(
                sum(u.get("usedSize", 0) + u.get("backingStorageSize", 0) for u in held if u)
            )
        self.peak.samples += 1
        self.peak.series.append(total)
        self.peak.peak_total = max(self.peak.peak_total, total)
        return total

    def sample_until(self, done: Callable[[], bool], every: float, timeout: float) -> HeapPeak:
        """Sample every `every` s until `done()` (bounded by `timeout`)."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"not done in {timeout:g} s ({self.peak.samples} samples)")
            self.sample()
            time.sleep(every)
        self.sample()
        return self.peak

    def close(self) -> None:
        self._sockets.clear()
        with contextlib.suppress(Exception):
            self._stack.close()


@contextlib.contextmanager
def heap_probe(debug_port: int, origin: str) -> Iterator[HeapProbe]:
    probe = HeapProbe(debug_port, origin)
    try:
        yield probe
    finally:
        probe.close()
