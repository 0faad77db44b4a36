"""Suite-wide rule: with PIGEONHOLE_NO_SKIP=1 (set by scripts/test) a skipped test fails.

Tests skip themselves, with a reason, when a real part they need (Java, Chromium, the
wormhole clients) is missing on a developer's machine; the README's test command installs all
of them, so there a skip means lost coverage and must not pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and os.environ.get("PIGEONHOLE_NO_SKIP") == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped, but PIGEONHOLE_NO_SKIP=1: {report.longrepr}"
    return report
