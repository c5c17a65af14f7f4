"""Test helpers that ship with the package, so downstream users can test against them too.

`FakeOpenAIServer` is a real OpenAI-compatible HTTP server on 127.0.0.1 with fault injection.
"""

from .fake_openai_server import (
    UNREADABLE_KINDS,
    FakeOpenAIServer,
    Fault,
    FaultKind,
    count_tokens,
    default_responder,
)

__all__ = [
    "UNREADABLE_KINDS",
    "FakeOpenAIServer",
    "Fault",
    "FaultKind",
    "count_tokens",
    "default_responder",
]
