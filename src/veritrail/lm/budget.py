"""A hard cap on what one command spends on model calls (`--max-cost USD`, `--max-tokens N`).

One `Budget` is shared by every `Model` of a command (`Model.budget`): `veritrail verify`,
`check` and `resume` give their run one, a local batch gives all its jobs the same one, `eval`
its model. The `Model` wrapper asks it before every call that goes over the wire (a response-cache
hit costs nothing and is never refused) and tells it what the call cost once it is known.

A call's cost is known only after it. So before it starts, the call *reserves* an upper estimate:

- tokens: its prompt at one token per 3 UTF-8 bytes (plus 4 per message; a BPE vocabulary needs
  fewer for English, about 1 per CJK character, which is 3 bytes) plus its reply limit
  (`GenerateConfig.max_tokens`), or, without one, the longest reply this budget has counted so
  far (`DEFAULT_REPLY_RESERVE` tokens before the first reply);
- dollars: those tokens at the model's price (`lm.pricing.Price`).

A call starts only if what was spent, plus what the calls in flight reserved, plus its own
reservation stays within the cap; when it finishes its reservation is replaced by what it really
cost (the provider's token counts, as `Model.usage` counts them). A call that would fit once the
calls in flight settle (what was spent plus its own reservation is within the cap) waits for
them; a call that would pass the cap whatever they cost is refused (`BudgetExhausted`), and the
budget is *reached* for good: no later call starts, whatever its size, so a run stops in one
place instead of trickling on with small calls. Calls already in flight finish.

The bound (tests/lm/test_budget.py checks it with hypothesis): the counted spend never exceeds
the cap by more than the calls' excess over their reservations, ``spent <= cap + sum(max(0,
actual - reserved))``; with a reply limit and a prompt within the estimate that excess is 0 and
the spend never passes the cap. And a call is refused only when what was spent plus its own
reservation passes the cap: the run stops within one call's reservation of the cap, however
many calls were in flight.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputProblem
from .base import FatalError

if TYPE_CHECKING:
    from .base import Message
    from .pricing import Price

DEFAULT_REPLY_RESERVE = 1024
"""Reply tokens a call without a reply limit reserves before any reply was counted (after that,
the longest reply counted: a fixed large figure stopped runs a few calls short of their cap)."""

_MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its text (role and separators), for the estimate."""


class BudgetExhausted(FatalError):
    """A call was refused because the budget was reached (never retried; nothing is sent)."""


class NoPriceError(InputProblem, ValueError):
    """`--max-cost` was given for a model whose price is unknown (the cap cannot be enforced):
    bad usage, exit 2, before any call."""


def prompt_estimate(messages: Sequence[Message]) -> int:
    """An upper estimate of a prompt's tokens: one per 3 UTF-8 bytes, plus 4 per message."""
    return sum(-(-len(m.content.encode("utf-8")) // 3) + _MESSAGE_OVERHEAD for m in messages)


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one call reserved before it started."""

    tokens: int
    dollars: float


@dataclass(frozen=True, slots=True)
class Spend:
    """What a budget counted: settled calls, and what calls in flight reserved."""

    tokens: int
    dollars: float
    reserved_tokens: int
    reserved_dollars: float
    calls: int
    refused: int
    waiting: int = 0
    """Calls waiting for the calls in flight to settle before they can start."""


def _money(x: float) -> str:
    return f"${x:.4f}".rstrip("0").rstrip(".") if x < 1 else f"${x:,.2f}"


class Budget:
    """The shared counter of one command's spend, with its caps (None = no cap of that kind).

    Thread-safe (a lock around the counters): the local batch runs on one event loop, but a
    provider may call back from another thread, and the check and the reservation must be one
    step.
    """

    def __init__(self, *, max_cost: float | None = None, max_tokens: int | None = None) -> None:
        if max_cost is not None and not max_cost >= 0:  # NaN fails too
            raise ValueError("max_cost must be a number >= 0")
        if max_tokens is not None and max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        self.max_cost = max_cost
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._tokens = 0
        self._dollars = 0.0
        self._reserved_tokens = 0
        self._reserved_dollars = 0.0
        self._calls = 0
        self._refused = 0
        self._longest_reply: int | None = None
        self._in_flight = 0
        self._waiters: list[asyncio.Future[None]] = []
        self.reached: str | None = None
        """Why no further call starts (set by the first refused call), or None."""

    @property
    def enabled(self) -> bool:
        """Whether any cap is set."""
        return self.max_cost is not None or self.max_tokens is not None

    def spend(self) -> Spend:
        """What was counted so far."""
        with self._lock:
            return Spend(
                self._tokens,
                self._dollars,
                self._reserved_tokens,
                self._reserved_dollars,
                self._calls,
                self._refused,
                sum(1 for w in self._waiters if not w.done()),
            )

    def caps(self) -> str:
        """The caps as the options that set them (``--max-cost 0.5 --max-tokens 10000``)."""
        parts = []
        if self.max_cost is not None:
            parts.append(f"--max-cost {self.max_cost:g}")
        if self.max_tokens is not None:
            parts.append(f"--max-tokens {self.max_tokens}")
        return " ".join(parts)

    def try_reserve(
        self, messages: Sequence[Message], max_reply: int | None, price: Price | None
    ) -> Reservation | None:
        """Reserve a call's estimated cost when it fits beside the calls in flight; None when it
        fits only once they settle (the caller waits: `reserve`); `BudgetExhausted` (and the
        budget marked reached) when it would pass a cap whatever they cost, i.e. what was spent
        plus its own reservation is already above it. `price` None counts 0 dollars (free or
        unpriced: a `--max-cost` run refuses an unpriced model before any call, `check_priced`).
        """
        with self._lock:
            tokens, dollars = self._estimate(messages, max_reply, price)
            if self.reached is None:
                self.reached = self._over(tokens, dollars, reserved=False)
                if self.reached is not None:
                    self._wake()  # calls waiting for room are refused now, not at the next settle
            if self.reached is not None:
                self._refused += 1
                raise BudgetExhausted(self.reached)
            if self._over(tokens, dollars, reserved=True) is not None:
                return None
            self._reserved_tokens += tokens
            self._reserved_dollars += dollars
            self._in_flight += 1
            return Reservation(tokens, dollars)

    def estimate(
        self, messages: Sequence[Message], max_reply: int | None, price: Price | None
    ) -> Reservation:
        """What a call would reserve now (nothing is reserved)."""
        with self._lock:
            return Reservation(*self._estimate(messages, max_reply, price))

    def _estimate(
        self, messages: Sequence[Message], max_reply: int | None, price: Price | None
    ) -> tuple[int, float]:
        prompt = prompt_estimate(messages)
        seen = self._longest_reply
        reply = max_reply if max_reply is not None else seen or DEFAULT_REPLY_RESERVE
        return prompt + reply, price.dollars(prompt, reply) if price is not None else 0.0

    async def reserve(
        self, messages: Sequence[Message], max_reply: int | None, price: Price | None
    ) -> Reservation:
        """`try_reserve`, waiting while the call fits only once calls in flight settle: near the
        cap calls go one after the other instead of being refused while the spend is still
        below it (calls queued behind a batch's shared concurrency limit hold reservations)."""
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiters.append(waiter)
            try:
                got = self.try_reserve(messages, max_reply, price)
                if got is not None:
                    return got
                await waiter  # woken by a settle, a release or the budget being reached
            finally:
                with self._lock:
                    self._waiters.remove(waiter)

    def _wake(self) -> None:
        """Wake every call waiting for room (lock held); safe from any thread."""
        for w in self._waiters:
            if not w.done():
                w.get_loop().call_soon_threadsafe(_resolve, w)

    def _over(self, tokens: int, dollars: float, *, reserved: bool) -> str | None:
        """Why a call reserving `tokens` and `dollars` would pass a cap (counting what the calls
        in flight reserved when `reserved`), or None. Lock held."""
        cap_tokens, cap_cost = self.max_tokens, self.max_cost
        held_tokens = self._reserved_tokens if reserved else 0
        held_dollars = self._reserved_dollars if reserved else 0.0
        if cap_tokens is not None and self._tokens + held_tokens + tokens > cap_tokens:
            return f"budget reached ({self._tokens:,} tokens spent, --max-tokens {cap_tokens})"
        # A small tolerance: float sums of prices must not refuse a call that fits exactly.
        if cap_cost is not None and self._dollars + held_dollars + dollars > cap_cost + 1e-12:
            return f"budget reached ({_money(self._dollars)} spent, --max-cost {cap_cost:g})"
        return None

    def settle(
        self, reservation: Reservation, input_tokens: int, output_tokens: int, dollars: float
    ) -> None:
        """Replace a finished call's reservation by what it cost."""
        with self._lock:
            self._release(reservation)
            self._tokens += input_tokens + output_tokens
            self._dollars += dollars
            self._calls += 1
            self._longest_reply = max(self._longest_reply or 0, output_tokens)

    def release(self, reservation: Reservation) -> None:
        """Drop the reservation of a call that failed or was cancelled (it cost nothing)."""
        with self._lock:
            self._release(reservation)

    def _release(self, r: Reservation) -> None:
        self._reserved_tokens -= r.tokens
        self._reserved_dollars -= r.dollars
        self._in_flight -= 1
        if self._in_flight == 0:
            # No call in flight: drop the float dust of many additions and subtractions.
            self._reserved_tokens = 0
            self._reserved_dollars = 0.0
        self._wake()  # room was freed (or the spend grew): waiting calls look again


def _resolve(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_result(None)


def check_priced(model_name: str, price: Price | None, budget: Budget | None) -> None:
    """Refuse a dollar cap on a model without a known price (`NoPriceError`): the cap could not
    be enforced, and ignoring it would spend without bound. Called before any call."""
    if budget is None or budget.max_cost is None or price is not None:
        return
    raise NoPriceError(
        f"no price known for {model_name}: use --max-tokens, or set prices with --prices FILE "
        "or VERITRAIL_PRICES (docs/models.md)"
    )


def _round_up(x: float) -> float:
    """`x` rounded up to two significant digits (a cap a person can read and type)."""
    if x <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(x)) - 1)
    return float(math.ceil(x / scale - 1e-9) * scale)


def raise_cap(budget: Budget, done: int = 0, left: int = 0) -> str:
    """The cap options to go on with: each cap at least doubled, and at least what the `left`
    claims would cost at what the `done` ones did, with a quarter more. A cap only bounds the
    spend, so a generous one costs nothing extra: the calls still to make are what is paid."""
    spend = budget.spend()
    parts = []
    if budget.max_cost is not None:
        need = spend.dollars / done * left * 1.25 if done and left else 0.0
        parts.append(f"--max-cost {_round_up(max(2 * budget.max_cost, need, 0.01)):g}")
    if budget.max_tokens is not None:
        need = spend.tokens / done * left * 1.25 if done and left else 0.0
        parts.append(f"--max-tokens {int(_round_up(max(2 * budget.max_tokens, need, 1000)))}")
    return " ".join(parts)


__all__ = [
    "DEFAULT_REPLY_RESERVE",
    "Budget",
    "BudgetExhausted",
    "NoPriceError",
    "Reservation",
    "Spend",
    "check_priced",
    "prompt_estimate",
    "raise_cap",
]
