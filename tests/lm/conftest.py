"""Fixtures for the model-layer tests: a loopback fake server and a fast retry policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.retry import RetryPolicy
from veritrail.testing import FakeOpenAIServer

FAST_RETRY = RetryPolicy(
    max_attempts=4,
    base_delay=0.01,
    max_delay=0.05,
    max_total_seconds=10.0,
    rate_limit_min_delay=0.01,
)
"""Retries in milliseconds, so fault tests run fast."""


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake chat-completions server on 127.0.0.1."""
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def caps() -> CapabilityStore:
    """An isolated capability store (the default one is process-wide)."""
    return CapabilityStore()
