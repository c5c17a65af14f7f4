"""What every progress display shares: model-call totals and compact number and duration text.

Three displays show a running job — `run.progress` (one verification), `batch.progress` (many)
and `eval.runner.EvalProgress` (`veritrail eval`) — and they count model calls the same way and
print figures the same way. That shared part lives here, in a module of its own, so the
evaluation does not import the run layer to format a number (docs/architecture.md).

* `CallTotals` — calls, cache hits, failures, tokens and dollars, counted from the model's call
  events (`lm.model.Model.on_call`); `CallLike` is the part of `lm.model.CallEvent` it reads
  (structural, so this module imports nothing of the model layer);
* `fmt_int` — 12345 as ``12.3k``; `fmt_duration` — seconds as ``1h02m``, ``3m05s`` or ``12s``;
* `fmt_dollars` — a cost, or "cost unknown" for models with no known price (`unpriced_models`
  reads them from a model's or a report's notes): a model without a price costs 0 in the
  figures, and a terminal must not show that 0 as if it were a price.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

NO_PRICE_NOTE = "no price known for "
"""How `lm.model.Model` begins the note it leaves for a model with no price (its `notes`, and a
report's `run.notes`); tests/cli/test_rough_edges_cost.py keeps the two in step."""


class CallLike(Protocol):
    """The fields of `lm.model.CallEvent` progress reads (kept structural to avoid an import)."""

    @property
    def step(self) -> str: ...
    @property
    def claim(self) -> str | None: ...
    @property
    def cached(self) -> bool: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def dollars(self) -> float: ...
    @property
    def error(self) -> str | None: ...


@dataclass(kw_only=True)
class CallTotals:
    """Model calls, tokens and dollars, counted from the model's call events (`Model.on_call`):
    the figures `verify`'s progress and `veritrail eval`'s progress line share."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    """Of `input_tokens`, those the provider served from its prompt (prefix) cache."""
    output_tokens: int = 0
    dollars: float = 0.0
    unpriced: tuple[str, ...] = ()
    """Models counted here that have no known price (their calls count 0 dollars)."""

    def dollars_text(self) -> str:
        """`dollars` as shown (`fmt_dollars`): "cost unknown" when a model has no price."""
        return fmt_dollars(self.dollars, self.unpriced)

    def call(self, event: CallLike) -> None:
        """Count one model call: answered (cache hits included) or failed after every retry."""
        if event.error is not None:
            self.failed_calls += 1
            return
        self.calls += 1
        self.cached_calls += int(event.cached)
        self.input_tokens += event.input_tokens
        self.cached_input_tokens += int(getattr(event, "cached_input_tokens", 0) or 0)
        self.output_tokens += event.output_tokens
        self.dollars += event.dollars


def fmt_int(n: float) -> str:
    """12345 -> 12.3k, for compact lines."""
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e4:
        return f"{n / 1e3:.1f}k"
    return f"{int(n)}"


def unpriced_models(notes: Iterable[str]) -> tuple[str, ...]:
    """The models that `notes` (a model's `notes`, a report's `run.notes`) say have no known
    price, in order, once each."""
    names = (
        n[len(NO_PRICE_NOTE) :].split(";", 1)[0].strip()
        for n in notes
        if isinstance(n, str) and n.startswith(NO_PRICE_NOTE)
    )
    return tuple(dict.fromkeys(n for n in names if n))


def fmt_dollars(dollars: float, unpriced: Sequence[str] = ()) -> str:
    """``$0.0123``; with models of no known price, "cost unknown (no price for M)", or the
    priced part followed by "+ unknown (...)" when other models had a price."""
    if not unpriced:
        return f"${dollars:.4f}"
    why = f"no price for {', '.join(unpriced)}"
    return f"cost unknown ({why})" if dollars <= 0 else f"${dollars:.4f} + unknown ({why})"


def shorten(text: str, limit: int) -> str:
    """`text` on one line (runs of whitespace made one space), cut to `limit` characters with
    an ellipsis: a claim or evidence text in a summary line, a CI message, an annotation."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


_UNPRINTABLE = re.compile(
    # C0 and C1 controls (ESC starts a terminal's escape sequences, a newline forges a line),
    # DEL, and the bidirectional controls that make a terminal show text in another order.
    "[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def printable(text: str) -> str:
    """`text` safe to print on a terminal: every control character (ESC, newline, ...) and
    every bidirectional control (U+202E, ...) shown as a Python-style escape (``\\x1b``,
    ``\\n``, ``\\u202e``) instead of acting. For names that come from outside: run
    directories, review authors."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


ETA_WEIGHT = 0.5
"""Weight of a fresh time-left estimate against the counted-down previous one."""


@dataclass
class Countdown:
    """A time left that holds still (`verify`'s and `eval`'s progress lines): set when a unit of
    work finishes, as a fresh estimate averaged with the previous one counted down
    (`ETA_WEIGHT`), counted down in between, and none once it runs out or is cleared."""

    _at: tuple[float, float] | None = field(default=None, repr=False)
    """(clock, seconds left) when it was last set."""

    def set(self, now: float, fresh: float | None) -> None:
        """A fresh estimate at `now` (None: no estimate until the next one)."""
        if fresh is None:
            self._at = None
            return
        previous = self.left(now)
        value = fresh if previous is None else ETA_WEIGHT * fresh + (1 - ETA_WEIGHT) * previous
        self._at = (now, value)

    def clear(self) -> None:
        """No estimate until the next `set`."""
        self._at = None

    def left(self, now: float) -> float | None:
        """Seconds left at `now`, or None."""
        if self._at is None:
            return None
        at, value = self._at
        remaining = value - (now - at)
        return remaining if remaining > 0 else None


def fmt_duration(s: float) -> str:
    """Seconds as 1h02m, 3m05s or 12s."""
    s = max(0, round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


__all__ = [
    "NO_PRICE_NOTE",
    "CallLike",
    "CallTotals",
    "fmt_dollars",
    "fmt_duration",
    "fmt_int",
    "printable",
    "shorten",
    "unpriced_models",
]
