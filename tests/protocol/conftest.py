"""Fixtures for the pure protocol tests."""

from __future__ import annotations

import pytest

from pigeonhole.protocol.channels import Rendezvous
from tests.protocol.protocol_support import fake_randomness


@pytest.fixture
def rz() -> Rendezvous:
    return Rendezvous(fake_randomness())
