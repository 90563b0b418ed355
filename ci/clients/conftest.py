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


# A producer that still holds undelivered messages when it is destroyed
# (a failed test's, kept alive by its traceback until the interpreter
# exits) blocks in librdkafka's destroy until they time out: with the
# tests' 120 s message timeouts and their brokers gone, pytest sat after
# its summary for over twenty minutes. Every producer is remembered, and
# at the end of the session whatever it still holds is purged.
import weakref  # noqa: E402

import confluent_kafka  # noqa: E402

_producers = weakref.WeakSet()


class _RememberedProducer(confluent_kafka.Producer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _producers.add(self)


confluent_kafka.Producer = _RememberedProducer


def pytest_sessionfinish(session, exitstatus):
    for p in list(_producers):
        try:
            p.purge()
            p.flush(0)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
