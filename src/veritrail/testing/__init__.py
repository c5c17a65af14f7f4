"""Test helpers that ship with the package, so downstream users can test against them too.

`FakeOpenAIServer` is a real OpenAI-compatible HTTP server on 127.0.0.1 with fault injection.
`assert_supported(answer, sources, ...)` fails a test when an answer is not supported by its
sources (`veritrail.check` underneath; imported on first use, so the server stays light).
`veritrail.testing.fixtures` is a pytest plugin (the `pytest` extra: `pip install
'veritrail[pytest]'`) whose `veritrail_loopback` fixture points a test at the word-overlap
demonstration server (`overlap`), for keyless tests of the plumbing. Nothing here imports pytest.
"""

from typing import Any

from .fake_openai_server import (
    UNREADABLE_KINDS,
    FakeOpenAIServer,
    Fault,
    FaultKind,
    count_tokens,
    default_responder,
)


def __getattr__(name: str) -> Any:
    if name in ("assert_supported", "failure_message", "NotAJudgeWarning"):
        from . import assertions

        return getattr(assertions, name)
    raise AttributeError(f"module 'veritrail.testing' has no attribute {name!r}")


__all__ = [
    "UNREADABLE_KINDS",
    "FakeOpenAIServer",
    "Fault",
    "FaultKind",
    "NotAJudgeWarning",
    "assert_supported",
    "count_tokens",
    "default_responder",
    "failure_message",
]
