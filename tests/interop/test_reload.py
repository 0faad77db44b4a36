"""SIGHUP to a running `pigeonhole serve`, with the real Python `wormhole` client.

A sender waits (nameplate claimed, PAKE message posted) while the settings file and the
deny file change and the server gets SIGHUP: the reload takes the new motd and rules and
drops no connection, and a receiver that comes after it completes the transfer. A client
whose address a rule denies is told why by `wormhole send` itself.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support.interop import Harness, check_success, senders_wait_through
from tests.support.interop_servers import Server
from tests.support.netns import Net
from tests.support.wormhole_clients import Codes, random_text

pytestmark = pytest.mark.interop

REASON = "This network is blocked for abuse: write to abuse@example.org"


def wait_for_log(server: Server, text: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in server.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{server.log_text()[-2000:]}"
        time.sleep(0.05)
    return server.log_text()


def test_a_waiting_send_completes_after_a_reload(net: Net, codes: Codes, tmp_path: Path) -> None:
    toml, rules = tmp_path / "pigeonhole.toml", tmp_path / "deny.txt"
    toml.write_text('motd = "before"\n')
    rules.write_text("# nothing denied yet\n")
    args = ["--config", str(toml), "--deny-file", str(rules)]
    server = Server(tmp_path / "data", tmp_path / "server.log", args=args)
    server.start()
    try:
        harness = Harness(net, server, tmp_path / "run", codes)

        def reload() -> None:
            toml.write_text('motd = "after"\nmax-creations = 6\ncommit-sync = "loop"\n')
            rules.write_text(f"deny 203.0.113.0/24 {REASON}\nnotice 198.51.100.7 hello\n")
            server.signal(signal.SIGHUP)
            wait_for_log(server, "reloaded:")

        (result,) = senders_wait_through(harness, harness, ["py"], reload, "reload")
        check_success(result, server)
        assert server.running
        log = server.log_text()
        assert "reload: --motd before -> after" in log
        assert "--max-creations 4 -> 6" in log
        assert "--commit-sync process -> loop needs a restart" in log
        # a broken file now: nothing changes, the line at fault is logged
        rules.write_text("deny 203.0.113.0/24 fine\ndeny 10.0.0.1/8 a typo\n")
        server.signal(signal.SIGHUP)
        assert "deny.txt:2: 10.0.0.1/8 has host bits set" in wait_for_log(
            server, "reload refused, nothing changed"
        )
        assert server.running
    finally:
        server.stop()


def test_a_denied_wormhole_send_prints_the_reason(net: Net, codes: Codes, tmp_path: Path) -> None:
    rules = tmp_path / "deny.txt"
    rules.write_text(f"deny 127.0.0.0/8 {REASON}\ndeny ::1 {REASON}\n")
    server = Server(tmp_path / "data", tmp_path / "server.log", args=["--deny-file", str(rules)])
    server.start()
    try:
        harness = Harness(net, server, tmp_path / "run", codes)
        sender = harness.start("py", "send", codes.next(), random_text(), "denied", timeout=60)
        assert sender.wait() != 0
        assert REASON in sender.output, sender.describe()
    finally:
        server.stop()
