"""Suite-wide rule: with PIGEONHOLE_NO_SKIP=1 (set by scripts/test) a skipped test fails.

Tests skip themselves, with a reason, when a real part they need (Java, Chromium, the
wormhole clients) is missing on a developer's machine; the README's test command installs all
of them, so there a skip means lost coverage and must not pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

#: every `pigeonhole serve` a test starts takes a free admin port unless the test names one
#: (the default, 4080, would be shared by servers running at once)
os.environ.setdefault("PIGEONHOLE_SERVE_ADMIN_PORT", "0")
#: and a free transit relay port (the default, 4001, likewise)
os.environ.setdefault("PIGEONHOLE_SERVE_TRANSIT_PORT", "0")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and os.environ.get("PIGEONHOLE_NO_SKIP") == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped, but PIGEONHOLE_NO_SKIP=1: {report.longrepr}"
    return report
