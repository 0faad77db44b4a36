"""A small real filesystem of the test's own: a tmpfs mounted for one test (needs root).

Disk-full and flood tests fill it for real; it is unmounted afterwards, lazily if
something still holds it (and the test then fails: nothing may outlive its server).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

MiB = 1024 * 1024


@contextlib.contextmanager
def small_tmpfs(mount_point: Path, size: int) -> Iterator[Path]:
    """Mount a fresh tmpfs of `size` bytes on `mount_point` (skipped where it cannot be)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root (CI runs the tests as root)")
    mount_point.mkdir(parents=True, exist_ok=True)
    options = f"size={size // MiB}m,mode=0700"
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except FileNotFoundError:
        pytest.skip("no mount(8) to mount a small tmpfs with")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (as root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        unmounted = subprocess.run(
            ["umount", str(mount_point)], capture_output=True, text=True, timeout=10
        )
        if unmounted.returncode != 0:  # something still holds it: never leave it mounted
            subprocess.run(["umount", "-l", str(mount_point)], timeout=10, check=False)
            pytest.fail(f"the test tmpfs was busy at the end: {unmounted.stderr.strip()}")


def free_bytes(path: Path) -> int:
    """Free bytes as the server measures them (server/disk.py)."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize
