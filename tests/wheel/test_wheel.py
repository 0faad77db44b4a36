"""The wheel carries the whole product: built from a clean tree, installed where no Node is.

`python -m build` makes the sdist from a copy of the checkout's files (tracked, and new
ones not ignored: what a clean checkout holds) and the wheel from that sdist, which runs
Node at build time (setup.py). The wheel goes into a fresh venv; `pigeonhole serve` runs
from it with PATH holding only that venv (no node), and answers the page's HTML and its
script, a real `wormhole send`/`receive` of a file through its mailbox and (both sides
without direct hints) its transit relay, and an envelope posted to and read back from
its archive.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pigeonhole.archive.bloom import FULL_BLOOM
from pigeonhole.archive.client import ArchiveClient
from pigeonhole.archive.envelopes import Envelope
from pigeonhole.archive.messages import sym_key_from_password
from pigeonhole.archive.requests import RequestPayload
from tests.support.process import Service, free_port, http_status

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORMHOLE = Path(sys.executable).with_name("wormhole")
#: seconds for one step: a build (npm ci from its cache), an install, a transfer
STEP_TIMEOUT = 300


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    assert done.returncode == 0, (
        f"{argv} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def clean_checkout(dest: Path) -> Path:
    """The checkout's files as a fresh clone of this work tree would hold them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no clean tree to build from")
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the built wheel, a fresh venv with it installed)."""
    for tool in ("node", "npm", "git"):
        if shutil.which(tool) is None:
            pytest.skip(f"building the wheel needs {tool}")
    work = tmp_path_factory.mktemp("wheel")
    tree = clean_checkout(work / "checkout")
    assert not (tree / "src/pigeonhole/web/assets").exists(), "the built page is gitignored"
    run([sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(tree)], work)
    (wheel,) = (work / "dist").glob("pigeonhole-*.whl")
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], work)
    run([str(venv / "bin/python"), "-m", "pip", "install", "-q", str(wheel)], work)
    yield wheel, venv


def test_the_sdist_and_wheel_carry_the_page(wheel_venv: tuple[Path, Path]) -> None:
    wheel, _ = wheel_venv
    names = zipfile.ZipFile(wheel).namelist()
    for asset in ("index.html", "app.js", "sw.js", "transit-worker.js", "style.css"):
        assert f"pigeonhole/web/assets/{asset}" in names
    (sdist,) = wheel.parent.glob("pigeonhole-*.tar.gz")
    listing = subprocess.run(["tar", "tzf", str(sdist)], capture_output=True, text=True).stdout
    assert "/web/package-lock.json" in listing and "/web/build.mjs" in listing
    assert "/src/pigeonhole/web/assets/" not in listing  # built from web/, never carried


def no_node_env(venv: Path) -> dict[str, str]:
    env = {"PATH": str(venv / "bin"), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    assert shutil.which("node", path=env["PATH"]) is None
    return env


def test_version_has_one_source(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = wheel_venv
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    answer = run([str(venv / "bin/pigeonhole"), "--version"], tmp_path, no_node_env(venv))
    assert answer.strip() == f"pigeonhole, version {declared}"


def fetch(url: str, accept: str) -> tuple[int, str, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Accept": accept})
    with opener.open(request, timeout=10) as answer:
        return answer.status, answer.headers["Content-Type"], answer.read()


async def archive_round_trip(url: str) -> list[bytes]:
    """Post one envelope to the archive, then ask for everything it holds."""
    envelope = Envelope(
        expiry=int(time.time()) + 3600,
        ttl=3600,
        topic=b"\x00\x00\x00\x01",
        data=b"kept by the wheel's archive",
        nonce=0,
    )
    async with ArchiveClient.connect(url) as client:
        assert await client.post([envelope]) == []
        reply = await client.request(
            RequestPayload(0, 0, FULL_BLOOM, 10), sym_key_from_password("status-offline-inbox")
        )
    return [e.data for e in reply.envelopes]


def test_installed_wheel_serves_without_node(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = wheel_venv
    port, relay_port = free_port(), free_port()
    server = Service(
        [
            str(venv / "bin/pigeonhole"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--transit-port",
            str(relay_port),
            "--admin-port",
            "0",
            "--data-dir",
            str(tmp_path / "data"),
            "--archive-min-pow",
            "0",
        ],
        tmp_path / "server.log",
        lambda: http_status(f"http://127.0.0.1:{port}/") == 200,
        env=no_node_env(venv),
        cwd=tmp_path,
        name="the wheel's pigeonhole serve",
    )
    with server:
        status, kind, html = fetch(f"http://127.0.0.1:{port}/", "text/html")
        assert status == 200 and kind.startswith("text/html")
        scripts = re.findall(rb'<script[^>]*\bsrc="([^"]+)"', html)
        assert scripts, html[:500]
        for src in scripts:
            status, kind, body = fetch(f"http://127.0.0.1:{port}{src.decode()}", "*/*")
            assert status == 200 and kind.startswith("text/javascript") and len(body) > 10_000

        payload = tmp_path / "payload.bin"
        payload.write_bytes(os.urandom(300_000))
        common = [
            str(WORMHOLE),
            "--relay-url",
            f"ws://127.0.0.1:{port}/v1",
            "--transit-helper",
            f"tcp:127.0.0.1:{relay_port}",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        code = "7-wheel-barrow"
        sender = subprocess.Popen(
            [
                *common,
                "send",
                "--hide-progress",
                "--no-listen",
                "--no-qr",
                "--code",
                code,
                str(payload),
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        inbox = tmp_path / "inbox"
        inbox.mkdir()
        try:
            received = subprocess.run(
                [
                    *common,
                    "receive",
                    "--hide-progress",
                    "--no-listen",
                    "--accept-file",
                    "-o",
                    "got.bin",
                    code,
                ],
                cwd=inbox,
                env=env,
                capture_output=True,
                text=True,
                timeout=STEP_TIMEOUT,
            )
            sent_out, _ = sender.communicate(timeout=STEP_TIMEOUT)
        finally:
            if sender.poll() is None:
                sender.kill()
                sender.wait()
        assert received.returncode == 0, received.stdout + received.stderr
        assert sender.returncode == 0, sent_out
        got = (inbox / "got.bin").read_bytes()
        assert hashlib.sha256(got).digest() == hashlib.sha256(payload.read_bytes()).digest()

        kept = asyncio.run(archive_round_trip(f"ws://127.0.0.1:{port}/whisper/v6"))
        assert kept == [b"kept by the wheel's archive"]
    log = server.log_text()
    assert "browser page served" in log and "not built" not in log
    # both sides had no direct hints: the file went through the wheel's relay
    with sqlite3.connect(tmp_path / "data" / "usage.sqlite") as usage:
        relayed = usage.execute("SELECT total_bytes FROM transit WHERE result='happy'").fetchall()
    assert relayed and relayed[0][0] > 300_000, relayed
