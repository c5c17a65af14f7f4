"""Fixtures for the model-layer tests: a loopback fake server and a fast retry policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from veritrail.lm.capabilities import CapabilityStore
from veritrail.lm.openai import HTTP_CLIENTS
from veritrail.testing import FakeOpenAIServer


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake chat-completions server on 127.0.0.1."""
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def caps() -> CapabilityStore:
    """An isolated capability store (the default one is process-wide)."""
    return CapabilityStore()


@pytest.fixture(params=HTTP_CLIENTS)
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once per HTTP transport under the SDK (selected by environment)."""
    name: str = request.param
    monkeypatch.setenv("VERITRAIL_HTTP_CLIENT", name)
    return name
