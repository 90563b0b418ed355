"""Fixtures the real-client test modules share."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import Broker  # noqa: E402


@pytest.fixture(scope="module")
def broker():
    """One broker on a fresh data directory for the module's tests."""
    b = Broker()
    b.start()
    yield b
    b.stop()
