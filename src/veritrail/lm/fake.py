"""A scripted provider for tests and offline plumbing (`fake/<anything>`).

It is a real provider behind the same contract as the HTTP ones: the wrapper caches, retries and
accounts its calls the same way. Each call pops the next scripted reply (a string, a callable of
the messages, or an exception to raise). It fails loudly when the script runs out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .base import GenerateConfig, Message, ModelOutput

Reply = str | Exception | Callable[[Sequence[Message]], str]


class ScriptExhaustedError(AssertionError):
    """The test gave fewer replies than the code under test asked for."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One request the fake received."""

    messages: tuple[Message, ...]
    config: GenerateConfig

    @property
    def prompt(self) -> str:
        """All message contents joined, for simple `in` assertions."""
        return "\n".join(m.content for m in self.messages)


class FakeProvider:
    """Scripted provider. `replies` are consumed in order; `responder` answers when they run out."""

    name = "fake"

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        model: str = "scripted",
        responder: Callable[[Sequence[Message]], str] | None = None,
        tokens_per_char: float = 0.25,
    ) -> None:
        self.model = model
        self._replies: list[Reply] = list(replies)
        self._responder = responder
        self._tokens_per_char = tokens_per_char
        self.calls: list[RecordedCall] = []

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies not yet consumed."""
        return len(self._replies)

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        self.calls.append(RecordedCall(tuple(messages), config))
        if self._replies:
            reply = self._replies.pop(0)
        elif self._responder is not None:
            reply = self._responder
        else:
            raise ScriptExhaustedError(
                f"fake provider script exhausted after {len(self.calls) - 1} replies; "
                f"last prompt began: {messages[-1].content[:200]!r}"
            )
        if isinstance(reply, Exception):
            raise reply
        text = reply(messages) if callable(reply) else reply
        n_in = sum(len(m.content) for m in messages)
        return ModelOutput(
            text=text,
            input_tokens=max(1, int(n_in * self._tokens_per_char)),
            output_tokens=max(1, int(len(text) * self._tokens_per_char)),
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        return None
