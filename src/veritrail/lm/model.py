"""`Model`: the one wrapper that owns the cross-cutting work around a provider call.

Order (documented in docs/models.md): cache → retries → concurrency limit → call → accounting.
Steps of the method only ever call `Model.generate` / `Model.generate_json` with a step name;
the claim being verified is taken from a context variable set by the runner (`claim_scope`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from ..records import StepCost
from .base import GenerateConfig, Message, Provider, ProviderError, ResponseFormat
from .jsonparse import JsonReplyError, parse_json_reply

T = TypeVar("T")

_current_claim: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "veritrail_claim", default=None
)


@contextlib.contextmanager
def claim_scope(claim_id: str | None) -> Iterator[None]:
    """Attribute every model call made inside this block (and its tasks) to `claim_id`."""
    token = _current_claim.set(claim_id)
    try:
        yield
    finally:
        _current_claim.reset(token)


def current_claim() -> str | None:
    """The claim id calls are currently attributed to."""
    return _current_claim.get()


@dataclass(frozen=True, slots=True)
class Generation:
    """One completed call as the steps see it."""

    text: str
    input_tokens: int
    output_tokens: int
    cached: bool = False


@dataclass(frozen=True, slots=True)
class StructuredResult(Generic[T]):
    """A structured reply: `value` when it parsed and validated, else `error` with the raw text."""

    value: T | None
    raw: str
    error: str | None = None
    attempts: int = 1


class Usage:
    """Token and call accounting per (claim, step); claim None = work outside any claim."""

    def __init__(self) -> None:
        self._by: dict[tuple[str | None, str], StepCost] = defaultdict(StepCost)

    def add(self, claim: str | None, step: str, cost: StepCost) -> None:
        """Record one call's cost."""
        self._by[(claim, step)] = self._by[(claim, step)] + cost

    def for_claim(self, claim: str | None) -> dict[str, StepCost]:
        """Cost per step for one claim."""
        return {s: c for (cl, s), c in self._by.items() if cl == claim}

    def total(self) -> StepCost:
        """Cost of everything recorded."""
        out = StepCost()
        for c in self._by.values():
            out = out + c
        return out

    def per_step(self) -> dict[str, StepCost]:
        """Cost per step over all claims."""
        out: dict[str, StepCost] = defaultdict(StepCost)
        for (_, s), c in self._by.items():
            out[s] = out[s] + c
        return dict(out)


class Model:
    """A provider plus caching, retries, concurrency and accounting."""

    def __init__(self, provider: Provider, *, max_reasks: int = 1) -> None:
        self.provider = provider
        self.usage = Usage()
        self.max_reasks = max_reasks

    @property
    def name(self) -> str:
        """`provider/model`."""
        return f"{self.provider.name}/{self.provider.model}"

    async def generate(
        self, messages: Sequence[Message], config: GenerateConfig | None = None, *, step: str
    ) -> Generation:
        """Make one call (or answer from cache). Raises `ProviderError` when retries are exhausted."""
        cfg = config or GenerateConfig()
        out = await self.provider.generate(messages, cfg)
        self.usage.add(
            current_claim(),
            step,
            StepCost(lm_calls=1, input_tokens=out.input_tokens, output_tokens=out.output_tokens),
        )
        return Generation(out.text, out.input_tokens, out.output_tokens)

    async def generate_json(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any],
        step: str,
        validate: Callable[[Any], T],
        config: GenerateConfig | None = None,
    ) -> StructuredResult[T]:
        """Ask for JSON matching `schema`, parse tolerantly, validate; re-ask within a bound.

        A reply that still cannot be read is returned as a `StructuredResult` with `error` set and
        the raw reply kept, never raised. Provider failures (after retries) do raise.
        """
        cfg = replace(
            config or GenerateConfig(),
            response_format=ResponseFormat.JSON_SCHEMA,
            json_schema=schema,
        )
        msgs = list(messages)
        raw, error = "", "no attempt"
        for attempt in range(1, self.max_reasks + 2):
            gen = await self.generate(msgs, cfg, step=step)
            raw = gen.text
            try:
                return StructuredResult(validate(parse_json_reply(raw)), raw, None, attempt)
            except (JsonReplyError, ValueError, TypeError, KeyError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            msgs = [
                *messages,
                Message("assistant", raw),
                Message(
                    "user",
                    "That reply could not be read: "
                    + error[:300]
                    + "\nAnswer again with only the JSON object that matches the requested format.",
                ),
            ]
        return StructuredResult(None, raw, error, self.max_reasks + 1)

    async def aclose(self) -> None:
        """Close the provider."""
        await self.provider.aclose()


__all__ = [
    "Generation",
    "Model",
    "ProviderError",
    "StructuredResult",
    "Usage",
    "claim_scope",
    "current_claim",
]
