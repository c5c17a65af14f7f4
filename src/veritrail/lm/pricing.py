"""Dollar prices per million tokens, overridable by the user.

The built-in table covers common hosted models at their published list prices (USD per 1M
tokens, as of late 2025); prices change, so users can override or extend it with a JSON file
(`--prices FILE`, config, or env `VERITRAIL_PRICES`)::

    {"openai/gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
     "my-vllm-model": {"input": 0, "output": 0}}

`cached_input` is the price of prompt tokens the provider answered from its prompt (prefix) cache
(OpenAI reports them as `usage.prompt_tokens_details.cached_tokens`); without it, cached tokens
cost the full input price, so a figure is never lower than the list price says.

Keys are `provider/model` or a bare model name; a model also matches the longest key that is a
prefix of it (`gpt-4o-2024-08-06` → `gpt-4o`). Embedded, fake and demonstration models cost nothing. A model
with no price costs 0 dollars and leaves a note, so a report never shows a made-up figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import environment


@dataclass(frozen=True, slots=True)
class Price:
    """USD per one million input, output and cached-input tokens."""

    input: float
    output: float
    cached_input: float | None = None
    """USD per 1M prompt tokens served from the provider's prompt cache; None = `input`."""

    def dollars(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """The cost of one call; `cached_input_tokens` (part of `input_tokens`) at the cached
        rate."""
        cached = max(0, min(cached_input_tokens, input_tokens))
        rate = self.input if self.cached_input is None else self.cached_input
        return (
            (input_tokens - cached) * self.input + cached * rate + output_tokens * self.output
        ) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "deepseek-chat": Price(0.27, 1.10, 0.07),
    "deepseek-v3": Price(0.27, 1.10, 0.07),
}
"""Built-in list prices (USD / 1M tokens: input, output, cached input). Override rather than
trust them for billing."""

FREE_PROVIDERS = frozenset({"local", "fake", "demo"})
"""Providers that run on this machine and cost nothing."""


class PriceTable:
    """Looks up the price of `provider/model`; user entries win over the built-in ones."""

    def __init__(self, overrides: Mapping[str, Price] | None = None, *, defaults: bool = True):
        self._prices: dict[str, Price] = dict(DEFAULT_PRICES) if defaults else {}
        self._prices.update(overrides or {})

    @classmethod
    def from_file(cls, path: str | Path) -> PriceTable:
        """Built-in prices updated with a JSON file `{name: {"input": x, "output": y}}` (an
        optional `"cached_input": z` prices prompt-cache hits)."""
        from ..textio import read_input_json  # UTF-8/BOM/nesting rules of every input file

        data = read_input_json(path, "price file")  # InputError is a ValueError
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a price file is a JSON object of name -> price")
        out: dict[str, Price] = {}
        for name, entry in data.items():
            try:
                cached = entry.get("cached_input")
                out[str(name)] = Price(
                    float(entry["input"]),
                    float(entry["output"]),
                    None if cached is None else float(cached),
                )
            except (TypeError, KeyError, ValueError, OverflowError, AttributeError) as exc:
                raise ValueError(
                    f"{path}: price of {name!r} needs numeric 'input' and 'output' "
                    "(and a numeric 'cached_input' if given)"
                ) from exc
        return cls(out)

    @classmethod
    def from_env(cls) -> PriceTable:
        """Built-in prices, updated from the file named by `VERITRAIL_PRICES` if set."""
        path = environment.get("VERITRAIL_PRICES")
        return cls.from_file(path) if path else cls()

    def lookup(self, provider: str, model: str) -> Price | None:
        """The price of a model, or None when it is unknown."""
        if provider in FREE_PROVIDERS:
            return Price(0.0, 0.0)
        for key in (f"{provider}/{model}", model):
            if key in self._prices:
                return self._prices[key]
        best: str | None = None
        best_len = 0
        for key in self._prices:
            bare = key.split("/", 1)[1] if key.startswith(f"{provider}/") else key
            if "/" in bare:
                continue  # an entry for another provider
            if model.startswith(bare) and len(bare) > best_len:
                best, best_len = key, len(bare)
        return self._prices[best] if best is not None else None


__all__ = ["DEFAULT_PRICES", "FREE_PROVIDERS", "Price", "PriceTable"]
