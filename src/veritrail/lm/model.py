"""`Model`: the one wrapper that owns the cross-cutting work around a provider call.

Order (documented in docs/models.md): cache → retries → concurrency limit → call → accounting.

1. **Cache**: the request is hashed (`lm.cache.cache_key`); a hit is returned at once, marked
   `cached=True`, counted as a call and as a cached call, with its tokens and zero dollars.
2. **Retries**: a miss goes through `lm.retry.retry_call` (classified, backoff with jitter,
   `Retry-After`, bounded); a request that still fails raises its `ProviderError`, which the
   loop records against the claim (`termination: error`). The first `EndpointError` (401/403,
   unknown model, no quota, malformed URL) is remembered in `Model.fatal`: every later call
   raises it again at once, sending nothing and reading no cache.
3. **Concurrency**: each attempt holds one slot of a semaphore shared by every claim that uses
   this `Model` (waits between retries do not hold a slot). With a slot held, a call under a
   spending cap (`Model.budget`, `lm.budget`: `--max-cost`, `--max-tokens`) reserves its
   estimated cost once, waiting while only the calls in flight leave no room, or is refused
   (`BudgetExhausted`, never retried, nothing sent); it settles at its real cost after the call.
4. **Call**: the provider does the transport only.
5. **Accounting**: calls, tokens and dollars per (claim, step); the claim comes from the context
   variable set by `claim_scope`, so steps only pass their step name. Prompt tokens the provider
   reports as served from its prompt cache (`ModelOutput.cached_input_tokens`) are counted apart
   (`StepCost.cached_input_tokens`) and priced at the cached-input rate (`lm.pricing.Price`). A
   response-cache hit (step 1) sends nothing, so it has no prompt-cache tokens.

Steps of the method only ever call `Model.generate` / `Model.generate_json` with a step name.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from ..fencing import fence
from ..records import StepCost
from ..redaction import redact
from .base import (
    EndpointError,
    GenerateConfig,
    Message,
    ModelOutput,
    Provider,
    ProviderError,
    ResponseFormat,
    UnsupportedFormatError,
)
from .budget import Budget, BudgetExhausted, Reservation
from .cache import ResponseCache, cache_key
from .capabilities import DEFAULT_CAPABILITIES, CapabilityStore
from .jsonparse import CutReplyError, JsonReplyError, parse_json_reply
from .pricing import Price, PriceTable
from .retry import RetryEvent, RetryPolicy, retry_call

T = TypeVar("T")

log = logging.getLogger("veritrail.lm")

DEFAULT_MAX_REASKS = 3
"""Re-asks `generate_json` makes after an unreadable reply, by default."""

REASK_TEMPERATURE_STEP = 0.2
"""Each re-ask raises the temperature by this much over the previous try ..."""
REASK_TEMPERATURE_CAP = 1.0
"""... up to this (a request that already asked for more keeps its own temperature)."""

LENGTH = "length"
"""The `finish_reason` of a reply the provider cut at the token limit."""
LENGTH_MESSAGE = "reply cut off at the token limit (finish_reason: length); answer more briefly"

_EXCERPT = 120
"""Characters of a bad reply quoted in `StructuredResult.unreadable`."""


def reask_temperature(base: float, reask: int) -> float:
    """The temperature of re-ask number `reask` (1-based; 0 = the first try) after a request at
    `base`: `base + 0.2 * reask`, capped at 1.0 but never below `base`. A deterministic model at
    temperature 0 would otherwise repeat the very reply it could not get right."""
    if reask <= 0:
        return base
    # Rounded: 0.7 + 0.2 is 0.8999999999999999 in floating point, and the value is sent as is.
    return max(base, min(REASK_TEMPERATURE_CAP, round(base + REASK_TEMPERATURE_STEP * reask, 6)))


def _unreadable_note(attempt: int, error: str, raw: str) -> str:
    excerpt = raw.strip()
    if len(excerpt) > _EXCERPT:
        excerpt = excerpt[:_EXCERPT] + "…"
    shown = repr(excerpt) if excerpt else "(empty reply)"
    return redact(f"try {attempt}: {error}; reply: {shown}")


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
    dollars: float = 0.0
    attempts: int = 1
    """HTTP calls made for this reply (0 for a cache hit)."""
    finish_reason: str | None = None
    """Why the provider stopped (``stop``, ``length`` ...), when it said; `generate_json` treats
    ``length`` as a cut reply."""


@dataclass(frozen=True, slots=True)
class StructuredResult(Generic[T]):
    """A structured reply: `value` when it parsed and validated, else `error` with the raw text."""

    value: T | None
    raw: str
    error: str | None = None
    attempts: int = 1
    response_format: ResponseFormat | None = None
    """The output mode the final attempt used (after any fallback)."""
    cached: bool = False
    """True when every attempt was answered from the cache."""
    unreadable: tuple[str, ...] = ()
    """One redacted line per unreadable reply seen during this call (the parse or validation
    error and a short excerpt of the raw reply), including replies that a later re-ask made
    good; the caller records them as issues on the claim."""


@dataclass(frozen=True, slots=True)
class CallEvent:
    """What `Model(on_call=...)` is told after each call, for traces and progress lines."""

    step: str
    claim: str | None
    cached: bool
    attempts: int
    input_tokens: int
    output_tokens: int
    dollars: float
    error: str | None = None
    cached_input_tokens: int = 0
    """Of `input_tokens`, those the provider served from its prompt (prefix) cache."""


class Usage:
    """Token and call accounting per (claim, step); claim None = work outside any claim.

    Kept per claim, so `for_claim` costs the claim's few steps: it is called as every claim
    finishes, and a scan over all (claim, step) pairs made that quadratic in the claims of a run
    (8-10 % of a batch worker's CPU at 1,500 claims, py-spy; benchmarks/README.md).
    """

    def __init__(self) -> None:
        self._by: dict[str | None, dict[str, StepCost]] = defaultdict(dict)

    def add(self, claim: str | None, step: str, cost: StepCost) -> None:
        """Record one call's cost."""
        steps = self._by[claim]
        prev = steps.get(step)
        steps[step] = cost if prev is None else prev + cost

    def for_claim(self, claim: str | None) -> dict[str, StepCost]:
        """Cost per step for one claim."""
        return dict(self._by.get(claim, {}))

    def total(self) -> StepCost:
        """Cost of everything recorded."""
        out = StepCost()
        for steps in self._by.values():
            for c in steps.values():
                out = out + c
        return out

    def per_step(self) -> dict[str, StepCost]:
        """Cost per step over all claims."""
        out: dict[str, StepCost] = {}
        for steps in self._by.values():
            for s, c in steps.items():
                prev = out.get(s)
                out[s] = c if prev is None else prev + c
        return out


@dataclass
class TransportStats:
    """Counters of what actually went over the wire (cache hits excluded)."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    format_fallbacks: int = 0
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def schema_instruction(schema: dict[str, Any]) -> str:
    """The text appended to the last user message when the endpoint cannot enforce a schema."""
    return (
        "Reply with only a JSON object (no prose, no code fence) that matches this JSON Schema:\n"
        + json.dumps(schema, sort_keys=True)
    )


def _with_instruction(messages: Sequence[Message], schema: dict[str, Any]) -> list[Message]:
    msgs = list(messages)
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].role == "user":
            msgs[i] = Message("user", msgs[i].content + "\n\n" + schema_instruction(schema))
            return msgs
    return [*msgs, Message("user", schema_instruction(schema))]


class Model:
    """A provider plus caching, retries, concurrency and accounting.

    Args:
        provider: the transport (`lm.openai.OpenAIProvider`, `lm.local.LocalProvider`,
            `lm.fake.FakeProvider`, ...).
        max_reasks: extra calls `generate_json` makes after an unreadable reply (default 3;
            each at a higher temperature, see `reask_temperature`).
        cache: a `ResponseCache`, or None for no caching.
        retry: the retry policy (default `RetryPolicy()`).
        concurrency: calls in flight at once through this model, over all claims (default 8).
        prices: the price table (default: built-in, updated from `VERITRAIL_PRICES`).
        capabilities: where detected structured-output limits are remembered (process-wide
            by default).
        on_call: told about every call (cache hits and failures included).
    """

    def __init__(
        self,
        provider: Provider,
        *,
        max_reasks: int = DEFAULT_MAX_REASKS,
        cache: ResponseCache | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int = 8,
        prices: PriceTable | None = None,
        capabilities: CapabilityStore | None = None,
        on_call: Callable[[CallEvent], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if max_reasks < 0:
            raise ValueError("max_reasks must be >= 0")
        self.provider = provider
        # Whether the method's steps should use their concise reply formats (bounded free text):
        # a provider says so with a `concise_replies = True` attribute (the embedded model does).
        self.concise_replies: bool = bool(getattr(provider, "concise_replies", False))
        self.usage = Usage()
        self.max_reasks = max_reasks
        self.cache = cache
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self.prices = prices or PriceTable.from_env()
        self.capabilities = capabilities or DEFAULT_CAPABILITIES
        self.on_call = on_call
        self.stats = TransportStats()
        self.notes: list[str] = []
        """Plain-language remarks for the report (unknown price, format fallbacks); redacted."""
        self.fatal: EndpointError | None = None
        """The first `EndpointError` a call hit; once set, every call raises it at once."""
        self.budget: Budget | None = None
        """The command's spending cap (`lm.budget`), shared with its other models; None = no
        cap. Asked before every call that goes over the wire, told each one's cost after it."""
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: asyncio.AbstractEventLoop | None = None
        price = self.prices.lookup(provider.name, provider.model)
        if price is None and callable(list_price := getattr(provider, "list_price", None)):
            # A provider that knows its models' list prices (LiteLLM's bundled cost map) fills
            # the gap the table leaves; a price file still wins.
            price = list_price()
        if price is None:
            self.notes.append(
                redact(
                    f"no price known for {self.name}; dollar costs are shown as 0 "
                    "(add it with a price file, see docs/models.md)"
                )
            )
        self._price = price

    @property
    def name(self) -> str:
        """`provider/model`."""
        return f"{self.provider.name}/{self.provider.model}"

    @property
    def endpoint(self) -> str:
        """The identity under which structured-output capabilities are remembered."""
        ep = getattr(self.provider, "endpoint", None)
        return ep if isinstance(ep, str) and ep else self.name

    @property
    def price(self) -> Price | None:
        """The model's price (None: unknown; `lm.budget.check_priced` refuses a dollar cap)."""
        return self._price

    def _semaphore(self) -> asyncio.Semaphore:
        # A semaphore belongs to one event loop; a Model reused across asyncio.run() calls
        # (tests, notebooks) gets a fresh one per loop.
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            self._sem = asyncio.Semaphore(self.concurrency)
            self._sem_loop = loop
        return self._sem

    def _dollars(self, out: ModelOutput) -> float:
        if self._price is None:
            return 0.0
        return self._price.dollars(out.input_tokens, out.output_tokens, out.cached_input_tokens)

    def _notify(self, event: CallEvent) -> None:
        if self.on_call is not None:
            self.on_call(event)

    async def generate(
        self, messages: Sequence[Message], config: GenerateConfig | None = None, *, step: str
    ) -> Generation:
        """Make one call (or answer from cache). Raises `ProviderError` when retries are exhausted,
        and `Model.fatal` at once, before the cache, once an `EndpointError` was seen."""
        if self.fatal is not None:
            raise self.fatal
        cfg = config or GenerateConfig()
        claim = current_claim()
        key: str | None = None
        if self.cache is not None:
            cache_model = getattr(self.provider, "cache_identity", None) or self.provider.model
            key = cache_key(self.provider.name, str(cache_model), messages, cfg)
            hit = self.cache.get(step, key)
            if hit is not None:
                self.usage.add(
                    claim,
                    step,
                    StepCost(
                        lm_calls=1,
                        cached_calls=1,
                        input_tokens=hit.input_tokens,
                        output_tokens=hit.output_tokens,
                    ),
                )
                self._notify(
                    CallEvent(step, claim, True, 0, hit.input_tokens, hit.output_tokens, 0.0)
                )
                return Generation(
                    hit.text,
                    hit.input_tokens,
                    hit.output_tokens,
                    cached=True,
                    attempts=0,
                    finish_reason=hit.finish_reason,
                )

        budget = self.budget
        reserved: list[Reservation] = []  # the call's one reservation, made with its first slot

        async def attempt() -> ModelOutput:
            async with self._semaphore():
                # Calls queued for a slot when the endpoint failed fatally send nothing either.
                if self.fatal is not None:
                    raise self.fatal
                if budget is not None and not reserved:
                    # Reserved once a slot is held, so calls queued behind this model's limit hold
                    # no reservation (a batch's shared limit is below: `Budget.reserve` waits
                    # rather than refuse while reservations alone leave no room);
                    # BudgetExhausted is a FatalError: never retried.
                    reserved.append(await budget.reserve(messages, cfg.max_tokens, self._price))
                self.stats.requests += 1
                return await self.provider.generate(messages, cfg)

        def on_retry(ev: RetryEvent) -> None:
            self.stats.retries += 1
            self.stats.errors[type(ev.error).__name__] += 1
            log.info(
                "%s: %s on attempt %d, retrying in %.2fs",
                self.name,
                redact(str(ev.error)),
                ev.attempt,
                ev.wait,
            )

        try:
            out, attempts = await retry_call(attempt, self.retry, on_retry=on_retry)
        except BaseException as exc:
            if budget is not None and reserved:
                budget.release(reserved[0])  # failed or cancelled: nothing to pay for
            if not isinstance(exc, ProviderError):
                raise
            if isinstance(exc, BudgetExhausted):
                raise  # refused before sending: not a transport failure (the run reports it)
            self.stats.failures += 1
            self.stats.errors[type(exc).__name__] += 1
            if isinstance(exc, EndpointError) and self.fatal is None:
                self.fatal = exc
                log.info("%s: %s; no further calls are sent", self.name, redact(exc.cause))
            self._notify(
                CallEvent(
                    step,
                    claim,
                    False,
                    exc.attempts,
                    0,
                    0,
                    0.0,
                    redact(f"{type(exc).__name__}: {exc}"),
                )
            )
            raise
        dollars = self._dollars(out)
        if budget is not None and reserved:
            budget.settle(reserved[0], out.input_tokens, out.output_tokens, dollars)
        self.usage.add(
            claim,
            step,
            StepCost(
                lm_calls=1,
                input_tokens=out.input_tokens,
                output_tokens=out.output_tokens,
                dollars=dollars,
                cached_input_tokens=out.cached_input_tokens,
            ),
        )
        # An empty reply is more often a glitch than an answer: do not make it permanent.
        if self.cache is not None and key is not None and out.text.strip():
            self.cache.put(step, key, self.name, out)
        self._notify(
            CallEvent(
                step,
                claim,
                False,
                attempts,
                out.input_tokens,
                out.output_tokens,
                dollars,
                cached_input_tokens=out.cached_input_tokens,
            )
        )
        return Generation(
            out.text,
            out.input_tokens,
            out.output_tokens,
            dollars=dollars,
            attempts=attempts,
            finish_reason=out.finish_reason,
        )

    async def _generate_structured(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any],
        config: GenerateConfig,
        step: str,
    ) -> tuple[Generation, ResponseFormat]:
        """One structured call, falling back to weaker output modes the endpoint accepts."""
        fmt = self.capabilities.best(self.endpoint)
        while True:
            cfg = replace(config, response_format=fmt, json_schema=schema)
            # Only json_schema carries the schema to the endpoint; otherwise it goes in the prompt.
            msgs = (
                list(messages)
                if fmt is ResponseFormat.JSON_SCHEMA
                else _with_instruction(messages, schema)
            )
            try:
                return await self.generate(msgs, cfg, step=step), fmt
            except UnsupportedFormatError:
                if fmt is ResponseFormat.TEXT:
                    raise
                nxt = self.capabilities.downgrade(self.endpoint, fmt)
                self.stats.format_fallbacks += 1
                # The model name, not the endpoint: a base URL may carry credentials.
                note = redact(
                    f"{self.name} rejected response_format {fmt.value}; using {nxt.value}"
                )
                if note not in self.notes:
                    self.notes.append(note)
                    print(f"veritrail: {note}", file=sys.stderr)
                fmt = nxt

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

        The best output mode the endpoint supports is used (json_schema → json_object → text,
        detected once per endpoint). A reply is read strictly first, then repaired
        (`lm.jsonparse.parse_json_reply`); the value must still pass `validate`. A reply that
        is cut -- it ends inside its JSON value, or the provider stopped it for length
        (`finish_reason == "length"`) -- is unreadable, never completed by the repair: a
        completed fragment would become a claim or a reasoning nobody wrote. A reply that
        cannot be read is answered with a re-ask that quotes the error, at a higher temperature
        each time (`reask_temperature`), up to `max_reasks` re-asks; every unreadable reply is
        listed in `StructuredResult.unreadable`, also when a later re-ask succeeds. Only when
        every try fails is the result returned with `error` set and the last raw reply kept,
        never raised. Provider failures (after retries) do raise `ProviderError`.
        """
        base = config or GenerateConfig()
        msgs = list(messages)
        raw, error = "", "no attempt"
        fmt: ResponseFormat | None = None
        all_cached = True
        notes: list[str] = []
        for attempt in range(1, self.max_reasks + 2):
            cfg = replace(base, temperature=reask_temperature(base.temperature, attempt - 1))
            gen, fmt = await self._generate_structured(msgs, schema, cfg, step)
            all_cached = all_cached and gen.cached
            raw = gen.text
            try:
                if gen.finish_reason == LENGTH:
                    # The provider says the reply was cut at the token limit: whatever its text
                    # reads as, what the model meant to say did not all arrive.
                    raise CutReplyError(LENGTH_MESSAGE)
                value = validate(parse_json_reply(raw))
                return StructuredResult(value, raw, None, attempt, fmt, all_cached, tuple(notes))
            except (JsonReplyError, ValueError, TypeError, KeyError) as exc:
                error = redact(f"{type(exc).__name__}: {exc}")
            notes.append(_unreadable_note(attempt, error, raw))
            msgs = [
                *messages,
                Message("assistant", raw),
                Message(
                    "user",
                    # The error can quote the reply (untrusted): it goes in fenced.
                    "That reply could not be read:\n"
                    + fence(error[:300], "error")
                    + "\nAnswer again with only the JSON object that matches the requested format.",
                ),
            ]
        return StructuredResult(
            None, raw, error, self.max_reasks + 1, fmt, all_cached, tuple(notes)
        )

    async def aclose(self) -> None:
        """Close the provider. The cache stays open: it may be shared with other models."""
        await self.provider.aclose()


__all__ = [
    "DEFAULT_MAX_REASKS",
    "CallEvent",
    "Generation",
    "Model",
    "ProviderError",
    "StructuredResult",
    "TransportStats",
    "Usage",
    "claim_scope",
    "current_claim",
    "reask_temperature",
    "schema_instruction",
]
