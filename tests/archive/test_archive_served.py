"""`pigeonhole serve` serves the archive at /whisper/v6, driven by `pigeonhole archive`."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.support.process import PIGEONHOLE, ServeProcess, free_port


def _run(*args: str) -> str:
    done = subprocess.run([*PIGEONHOLE, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_serve_archives_and_serves_envelopes(tmp_path: Path) -> None:
    """Envelopes posted through the CLI are served back by query, and counted in /metrics."""
    admin_port = free_port()
    server = ServeProcess(
        tmp_path / "serve.log", "--admin-port", str(admin_port), "--data-dir", str(tmp_path)
    )
    port = server.port
    with server:
        url = f"ws://127.0.0.1:{port}"
        now = int(time.time())
        hashes = [
            _run("archive", "post", "--url", url, "--topic", "cafebabe", "--data", f"0{i}").strip()
            for i in range(3)
        ]
        _run("archive", "post", "--url", url, "--topic", "00000001", "--data", "ff")
        lines = _run(
            "archive",
            "query",
            "--url",
            url,
            "--password",
            "status-offline-inbox",
            "--from",
            str(now - 60),
            "--to",
            str(now + 60),
            "--topic",
            "cafebabe",
        ).splitlines()
        got = [json.loads(line) for line in lines]
        assert sorted(g["hash"] for g in got[:-1]) == sorted(hashes)
        assert got[-1]["cursor"] is None
        admin = f"http://127.0.0.1:{admin_port}"  # /metrics is on the admin listener
        metrics = urllib.request.urlopen(f"{admin}/metrics").read().decode()
        assert "pigeonhole_archive_archived_total 4" in metrics
        assert (tmp_path / "archive.sqlite").exists()
    assert server.returncode == 0
