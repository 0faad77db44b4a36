"""The shared process helpers: a start fails with the program's own output, a program
never ready is killed, and a restart's output is its own."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.support.process import Service, accepts_tcp, free_port


def test_a_program_that_exits_while_starting_fails_with_its_stderr(tmp_path: Path) -> None:
    code = "import sys; sys.stderr.write('no such store\\n'); sys.exit(3)"
    service = Service([sys.executable, "-c", code], tmp_path / "out.log", lambda: False)
    with pytest.raises(AssertionError, match=r"exited with 3 while starting:\n(.|\n)*no such"):
        service.start()


def test_a_program_never_ready_is_killed_after_the_timeout(tmp_path: Path) -> None:
    code = "import time; time.sleep(60)"
    service = Service([sys.executable, "-c", code], tmp_path / "out.log", lambda: False)
    with pytest.raises(AssertionError, match=r"was not ready within 0\.5 s"):
        service.start(timeout=0.5)
    assert service.returncode == -signal.SIGKILL


def test_a_restart_answers_again_and_its_output_is_its_own(tmp_path: Path) -> None:
    port = free_port()
    code = (
        "import socket, sys\n"
        "s = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
        "print('listening', flush=True)\n"
        "while True: s.accept()[0].close()\n"
    )
    argv = [sys.executable, "-c", code, str(port)]
    service = Service(argv, tmp_path / "out.log", lambda: accepts_tcp(port))
    with service:
        assert service.output() == "listening\n"
    assert service.returncode == -signal.SIGTERM and not accepts_tcp(port)
    with service.start():
        assert accepts_tcp(port) and service.output() == "listening\n"
    assert service.log_text().count("=== start") == 2
