"""`run(config)`, the run loop without the command line: serves until SIGINT, exits clean."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: a process that runs a ServerConfig the way `pigeonhole serve` does, logging to stderr
SCRIPT = """
import logging, sys
from pathlib import Path
from pigeonhole.config import ServerConfig
from pigeonhole.server.run import run
logging.basicConfig(level=logging.INFO)
run(ServerConfig(port=int(sys.argv[1]), admin_port=0, transit_port=0, data_dir=Path(sys.argv[2])))
print("run returned", flush=True)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_run_serves_until_sigint_then_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIGEONHOLE")}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(port), str(tmp_path / "data")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as answer:
                    assert answer.read() == b"Wormhole Relay\n"
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "not serving"
                time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == "run returned\n"  # stopped and returned, no KeyboardInterrupt
    assert "signal received, shutting down" in err
    assert (tmp_path / "data" / "channel.sqlite").exists()
