"""Helpers for tests that watch processes they started."""

from __future__ import annotations

import signal
import subprocess


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (state, parent, ...); None: no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet."""
    fields = _stat(pid)
    return fields is None or fields[0] == "Z"


def parent(pid: int) -> int | None:
    """The parent's PID, or None if the process is gone."""
    fields = _stat(pid)
    return int(fields[1]) if fields is not None else None


def stop(
    proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, timeout: float = 15.0
) -> int | None:
    """Send `sig` to a process we started and wait; SIGKILL after `timeout`. Its status."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
