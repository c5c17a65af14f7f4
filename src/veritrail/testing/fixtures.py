"""pytest fixtures of `veritrail.testing` (the `pytest` extra: ``pip install 'veritrail[pytest]'``).

Load them in a conftest.py with ``pytest_plugins = ["veritrail.testing.fixtures"]`` (or run
``pytest -p veritrail.testing.fixtures``):

* `veritrail_loopback` — a running `FakeOpenAIServer` answering with the word-overlap responder
  (`veritrail.testing.overlap`), and the test's environment pointed at it (`loopback_env`: the
  model, its base URL, a dummy key, no response cache), so `assert_supported`, `veritrail.check`
  and the CLI run in a test without a key, a download or the network. **A demonstration, not a
  model**: its verdicts only say whether a claim's content words occur in the evidence, for
  testing the plumbing of your own tests, never for real verdicts.
"""

from __future__ import annotations

from collections.abc import Iterator

try:
    import pytest
except ImportError as exc:  # the module is imported only by pytest users; say what to install
    raise ImportError(
        "veritrail.testing.fixtures needs pytest: pip install 'veritrail[pytest]'"
    ) from exc

from .fake_openai_server import FakeOpenAIServer
from .overlap import loopback_env, responder

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


@pytest.fixture
def veritrail_loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """The word-overlap demonstration server, with this test's environment pointed at it."""
    with FakeOpenAIServer(responder=responder) as srv:
        for name, value in loopback_env(srv).items():
            monkeypatch.setenv(name, value)
        for name in _PROXIES:  # the loopback server is never reached through a proxy
            monkeypatch.delenv(name, raising=False)
        yield srv


__all__ = ["veritrail_loopback"]
