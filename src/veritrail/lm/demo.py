"""`demo/overlap`: the word-overlap demonstration model (`lm.overlap`), in-process.

Keyless and offline, for trying every command and for the docs' examples. **It is a
demonstration, not a judge**: its verdicts only say whether a claim's content words occur in the
evidence. It runs behind the same `Model` wrapper as the HTTP providers (cache, usage, costs: its
calls are free), so a run with it exercises the same path as a real one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InputProblem
from .base import GenerateConfig, Message, ModelOutput
from .overlap import responder

DEMO_MODELS = ("overlap",)
"""The demonstration models `demo/` serves."""

DEMO_LABEL = "demonstration, not a judge"
"""How every verdict made by a demonstration model is labelled where it is shown."""


class DemoProvider:
    """Answers each call with `lm.overlap.responder`; tokens are counted as characters / 4."""

    name = "demo"
    default_concurrency = 8

    def __init__(self, model: str) -> None:
        if model not in DEMO_MODELS:
            raise InputProblem(
                f"unknown demonstration model demo/{model} (known: "
                + ", ".join(f"demo/{m}" for m in DEMO_MODELS)
                + ")"
            )
        self.model = model

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        request = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "response_format": (
                {"type": "json_schema", "json_schema": {"name": config.schema_name}}
                if config.json_schema is not None
                else None
            ),
        }
        text = responder(request)
        n_in = sum(len(m.content) for m in messages)
        return ModelOutput(
            text=text,
            input_tokens=max(1, n_in // 4),
            output_tokens=max(1, len(text) // 4),
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        return None


def is_demonstration(model_name: str | None) -> bool:
    """Whether `model_name` (`provider/model`) is a demonstration model (`demo/...`)."""
    return bool(model_name) and str(model_name).startswith("demo/")


__all__ = ["DEMO_LABEL", "DEMO_MODELS", "DemoProvider", "is_demonstration"]
