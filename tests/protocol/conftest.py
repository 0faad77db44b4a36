"""Fixtures for the pure protocol tests."""

from __future__ import annotations

import pytest
from protocol_support import fake_randomness

from pigeonhole.protocol.channels import Rendezvous


@pytest.fixture
def rz() -> Rendezvous:
    return Rendezvous(fake_randomness())
