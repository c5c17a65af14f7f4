"""The word-overlap "model" (`veritrail.testing.overlap`) as a pytest fixture: the API,
`veritrail check`, `assert_supported` and the docs' snippets run end to end over real HTTP without
a key or the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from veritrail.testing import FakeOpenAIServer
from veritrail.testing.overlap import content_words, loopback_env, responder

__all__ = ["content_words", "loopback", "loopback_env", "responder"]


@contextmanager
def loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """A running server with `responder`, and this process's environment pointed at it."""
    with FakeOpenAIServer(responder=responder) as srv:
        for k, v in loopback_env(srv).items():
            monkeypatch.setenv(k, v)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield srv
