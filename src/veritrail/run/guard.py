"""A serving-time guard: verify one answer within a latency budget, then let a policy decide.

`aguard(answer, sources, budget_ms=...)` (and its synchronous form `guard`) checks an answer
against its sources as `veritrail check` does, or a run's DAG as `verify` does (`dag=`), but for
a server answering a user (docs/api.md, "Guarding answers while serving"):

* the cheapest path: no run directory, no report, no HTML; claims given (`claims=`) skip
  extraction, otherwise the batched extraction (one call per stage for up to a window of
  sentences); claims sharing their inputs share prompts (`claims_per_prompt`); a sources-and-
  answer DAG is single-step, so every claim ends after one round (its candidates are roots);
* a deadline: at `budget_ms` every call still in flight is cancelled (the tasks are awaited,
  none is left behind) and the claims not finished are "not done" with the reason;
* `on_timeout`: "pass" returns the answer marked unverified, "block" returns it blocked (the
  streamed and LangChain forms raise `GuardBlocked`);
* a streamed answer (`aguard_stream`, `guard_stream`) is verified when it completes.

A model failure is treated as a time-out is (the answer could not be verified in time), never
raised: a guard in a request path must answer. Bad input raises `JobInputError` before any call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

# The method's modules are imported here, not on first use: `vt.guard` loads this module, and
# a first request must not pay for imports inside its budget (docs/api.md: warm-up).
from ..dag import Dag
from ..errors import VeritrailError
from ..lm.base import ProviderError
from ..lm.budget import NoPriceError, check_priced
from ..method.config import fit_to_context, model_context_window
from ..method.extraction import ExtractionConfig, ExtractionMode, SentenceOutcome, extract
from ..method.loop import verify_claims
from ..method.prompting import prompt_dir
from ..method.sharing import cancel_in_flight
from ..records import Claim, ClaimResult, Termination, Verdict
from ..redaction import redact
from .build import build_steps
from .inputs import job_settings, model_name
from .model_spec import ModelSpec
from .settings import step_specs
from .sources import SourceText, single_step_dag
from .spec import JobInputError

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..method.config import VerifyConfig
    from ..method.steps import Steps
    from .settings import Settings

Policy = Literal["pass", "block"]
SourcesArg = str | Sequence[str] | Mapping[str, str]


class GuardOutcome(StrEnum):
    """What the guard decided about one answer."""

    SUPPORTED = "supported"
    """Every claim was judged Fully Supported within the budget."""
    UNSUPPORTED = "unsupported"
    """At least one claim was judged Not Fully Supported or Inconclusive (the others may be
    unfinished: one unsupported claim is enough to say so)."""
    UNVERIFIED = "unverified"
    """Not every claim was judged (time-out or a model failure) and the policy is "pass"."""
    BLOCKED = "blocked"
    """Not every claim was judged (time-out or a model failure) and the policy is "block"."""


class ClaimStatus(StrEnum):
    """Where one claim stands when the guard returns."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    INCONCLUSIVE = "inconclusive"
    NOT_DONE = "not done"
    """Not finished by the deadline (or never started: extraction did not finish)."""
    ERROR = "error"
    """The model calls of this claim failed."""


@dataclass(frozen=True, slots=True)
class GuardedClaim:
    """One claim of a guarded answer, its status and why (the judge's reasoning, or the cause
    it was not judged)."""

    id: str
    text: str
    status: ClaimStatus
    reason: str


@dataclass(frozen=True, slots=True)
class GuardResult:
    """The guard's decision about one answer."""

    answer: str
    outcome: GuardOutcome
    claims: tuple[GuardedClaim, ...]
    budget_ms: float
    elapsed_ms: float
    lm_calls: int
    """Model calls answered for this answer (cache hits included; calls cancelled at the
    deadline are not counted)."""
    timed_out: bool
    reason: str | None = None
    """Why the answer was not fully verified: the time-out or the failure; None when it was."""

    @property
    def allowed(self) -> bool:
        """True when the answer may be shown: supported, or unverified under "pass"."""
        return self.outcome in (GuardOutcome.SUPPORTED, GuardOutcome.UNVERIFIED)

    @property
    def verified(self) -> bool:
        """Every claim was judged (whatever the verdicts)."""
        return all(c.status not in (ClaimStatus.NOT_DONE, ClaimStatus.ERROR) for c in self.claims)

    def with_status(self, status: ClaimStatus) -> tuple[GuardedClaim, ...]:
        """The claims of one status."""
        return tuple(c for c in self.claims if c.status is status)


class GuardBlocked(VeritrailError):
    """Raised by the streamed and LangChain forms when the answer is not allowed
    (`GuardResult.allowed` is False): blocked at the time-out, or a claim found unsupported.
    `result` holds the decision."""

    exit_code = 3

    def __init__(self, result: GuardResult) -> None:
        self.result = result
        super().__init__(_blocked_message(result))


def _blocked_message(r: GuardResult) -> str:
    if r.outcome is GuardOutcome.UNSUPPORTED:
        bad = [
            c for c in r.claims if c.status in (ClaimStatus.UNSUPPORTED, ClaimStatus.INCONCLUSIVE)
        ]
        return f"answer blocked: {len(bad)} of {len(r.claims)} claims not supported"
    return f"answer blocked: {r.reason or 'not verified'}"


@dataclass(slots=True)
class _Progress:
    """What the guard's task has reached when the deadline comes (written by that task only)."""

    claims: list[Claim] | None = None
    done: dict[str, ClaimResult] = field(default_factory=dict)
    failure: str | None = None


def _check_inputs(
    answer: Any, sources: Any, dag: Any, claims: Any, budget_ms: Any, on_timeout: Any
) -> None:
    if not isinstance(budget_ms, int | float) or isinstance(budget_ms, bool) or budget_ms <= 0:
        raise JobInputError(f"guard(): budget_ms must be a positive number (got {budget_ms!r})")
    if on_timeout not in ("pass", "block"):
        raise JobInputError(f'guard(): on_timeout must be "pass" or "block" (got {on_timeout!r})')
    if dag is not None:
        if not isinstance(dag, Dag):
            raise JobInputError(f"guard(): dag must be a veritrail.Dag, not {type(dag).__name__}")
        if sources is not None or answer is not None:
            raise JobInputError("guard(): give answer and sources, or dag=, not both")
    else:
        if not isinstance(answer, str):
            raise JobInputError(f"guard(): answer must be a str, not {type(answer).__name__}")
        if sources is None:
            raise JobInputError("guard(): give the answer's sources (or dag=)")
    if claims is not None and (
        isinstance(claims, str | bytes) or not all(isinstance(c, str | Claim) for c in claims)
    ):
        raise JobInputError("guard(): claims must be a list of claim texts or Claims")


def _source_texts(sources: SourcesArg) -> list[SourceText]:
    if isinstance(sources, str):
        return [SourceText("source1", sources)]
    if isinstance(sources, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in sources.items()):
            raise JobInputError("guard(): sources given as a dict must map str names to str texts")
        return [SourceText(k, v) for k, v in sources.items()]
    if not isinstance(sources, list | tuple) or not all(isinstance(s, str) for s in sources):
        raise JobInputError("guard(): sources must be a text, a list of texts or a dict of texts")
    return [SourceText(f"source{i}", s) for i, s in enumerate(sources, 1)]


def _claims(claims: Sequence[str | Claim]) -> list[Claim]:
    out = [c if isinstance(c, Claim) else Claim(f"c{i}", c) for i, c in enumerate(claims, 1)]
    if not out or any(not c.text.strip() for c in out):
        raise JobInputError("guard(): claims must be non-empty texts")
    return out


def _status(r: ClaimResult) -> tuple[ClaimStatus, str]:
    if r.termination is Termination.ERROR or r.verdict is None:
        return ClaimStatus.ERROR, redact((r.error or "failed").splitlines()[0])
    status = {
        Verdict.FULLY_SUPPORTED: ClaimStatus.SUPPORTED,
        Verdict.NOT_FULLY_SUPPORTED: ClaimStatus.UNSUPPORTED,
        Verdict.INCONCLUSIVE: ClaimStatus.INCONCLUSIVE,
    }[r.verdict]
    return status, r.reasoning


def _decide(
    answer: str,
    progress: _Progress,
    *,
    budget_ms: float,
    elapsed_ms: float,
    lm_calls: int,
    timed_out: bool,
    on_timeout: Policy,
) -> GuardResult:
    cause = f"time-out: not finished within {budget_ms:g} ms" if timed_out else progress.failure
    claims: list[GuardedClaim] = []
    for c in progress.claims or []:
        got = progress.done.get(c.id)
        if got is None:
            claims.append(GuardedClaim(c.id, c.text, ClaimStatus.NOT_DONE, cause or "not done"))
        else:
            status, why = _status(got)
            claims.append(GuardedClaim(c.id, c.text, status, why))
    if progress.claims is None and cause is None:
        cause = "claims were not extracted"
    if (
        progress.claims is not None
        and cause is None
        and any(c.status is ClaimStatus.ERROR for c in claims)
    ):
        cause = "the model calls of some claims failed"
    if progress.claims is None and cause is not None and not timed_out:
        cause = f"claims could not be extracted: {cause}"
    elif progress.claims is None and timed_out:
        cause = f"{cause} (while extracting claims)"
    judged = [c for c in claims if c.status not in (ClaimStatus.NOT_DONE, ClaimStatus.ERROR)]
    if any(c.status in (ClaimStatus.UNSUPPORTED, ClaimStatus.INCONCLUSIVE) for c in judged):
        outcome = GuardOutcome.UNSUPPORTED
    elif cause is None and len(judged) == len(claims):
        outcome = GuardOutcome.SUPPORTED
    else:
        outcome = GuardOutcome.UNVERIFIED if on_timeout == "pass" else GuardOutcome.BLOCKED
    return GuardResult(
        answer=answer,
        outcome=outcome,
        claims=tuple(claims),
        budget_ms=float(budget_ms),
        elapsed_ms=elapsed_ms,
        lm_calls=lm_calls,
        timed_out=timed_out,
        reason=None if outcome is GuardOutcome.SUPPORTED else cause,
    )


async def _work(
    dag: Dag,
    claims: list[Claim] | None,
    model: Model,
    steps: Steps,
    config: VerifyConfig,
    settings: Settings,
    progress: _Progress,
) -> None:
    """Extract (unless given) and verify, recording each finished claim in `progress` at once,
    so what finished before the deadline is kept when the rest is cancelled."""

    with prompt_dir(settings.prompt_dir):
        if claims is None:
            try:
                got = await extract(
                    model,
                    dag.node(dag.terminal).text,
                    question=settings.question,
                    config=ExtractionConfig(mode=ExtractionMode(settings.extraction)),
                )
            except ProviderError as exc:
                progress.failure = redact(str(exc))
                return
            failed = [t for t in got.trace if t.outcome is SentenceOutcome.ERROR]
            if failed:
                # An unread sentence yields no claim: passing the rest as verified would pass a
                # part of the answer never checked.
                progress.failure = (
                    f"{len(failed)} of {len(got.trace)} sentences could not be read "
                    f"({redact(str(failed[0].error or 'unreadable reply'))[:200]})"
                )
                return
            claims = list(got.claims)
        progress.claims = claims
        if not claims:
            return

        def finished(r: ClaimResult) -> None:
            progress.done[r.claim.id] = r

        await verify_claims(
            dag,
            claims,
            steps,
            config,
            on_result=finished,
            max_parallel_claims=settings.max_parallel_claims,
        )


async def aguard(
    answer: str | None = None,
    sources: SourcesArg | None = None,
    *,
    dag: Dag | None = None,
    budget_ms: float = 2000,
    on_timeout: Policy = "pass",
    claims: Sequence[str | Claim] | None = None,
    model: str | Model | None = None,
    base_url: str | None = None,
    question: str | None = None,
    chunk_sentences: int | None = None,
    chunk_tokens: int | None = None,
    config: str | None = None,
    raise_blocked: bool = False,
    **settings: Any,
) -> GuardResult:
    """Verify `answer` against `sources` (or the DAG `dag`, its answer the terminal node's text)
    within `budget_ms` milliseconds; see the module docstring and docs/api.md.

    `model` is a `provider/model` name (settings as `veritrail.check` reads them: arguments,
    `VERITRAIL_*` variables, `config=` or `./veritrail.toml`) — a model built and closed per
    call — or a `veritrail.Model` you keep across calls of one event loop (its connections are
    reused; the guard never closes it). Returns a `GuardResult` (`raise_blocked=True`: raises
    `GuardBlocked` instead when the answer is not allowed); raises `JobInputError` on bad input,
    before any model call.
    """
    t0 = time.monotonic()
    _check_inputs(answer, sources, dag, claims, budget_ms, on_timeout)
    own = not _is_model(model)
    given = {
        "model": None if not own else model,
        "base_url": base_url,
        "question": question,
        **settings,
    }
    s = job_settings(given, config_path=config)
    if dag is None:
        assert answer is not None and sources is not None
        the_dag = single_step_dag(
            answer,
            _source_texts(sources),
            chunk_sentences=chunk_sentences,
            chunk_tokens=chunk_tokens,
        ).dag
    else:
        the_dag = dag
    text = the_dag.node(the_dag.terminal).text
    claim_list = _claims(claims) if claims is not None else None

    try:
        cfg = s.verify_config()
    except ValueError as exc:
        raise JobInputError(f"guard(): {exc}") from None
    if own:
        try:
            lm = ModelSpec.from_settings(s, model_name(s, None)).build(concurrency=s.concurrency)
        except ValueError as exc:  # an unknown provider, an option it does not take
            raise JobInputError(redact(str(exc))) from None
        budget = s.budget()
        if budget is not None:  # `max_cost=`/`max_tokens=`: a cap on this answer's calls
            try:
                check_priced(lm.name, lm.price, budget)  # refused, never ignored, unpriced
            except NoPriceError as exc:
                await lm.aclose()
                raise JobInputError(redact(str(exc))) from None
            lm.budget = budget
    else:
        assert model is not None and not isinstance(model, str)
        if s.budget() is not None:
            raise JobInputError(
                "guard(): max_cost/max_tokens cap a model the guard builds; give your Model "
                "its own cap (Model.budget)"
            )
        lm = model
    cfg = fit_to_context(cfg, model_context_window(lm.provider))

    try:  # plugged steps (`decomposer=`, `selector=`, `judge=`) as `check` takes them
        steps = build_steps(lm, step_specs(s), sample_temperature=s.sample_temperature)
    except JobInputError:
        if own:
            await lm.aclose()
        raise
    calls_before = lm.usage.total().lm_calls
    progress = _Progress()
    left = budget_ms / 1000 - (time.monotonic() - t0)
    task = asyncio.ensure_future(_work(the_dag, claim_list, lm, steps, cfg, s, progress))
    timed_out = False
    try:
        try:
            # `wait`, not `wait_for`: at the deadline the task is cancelled below and awaited,
            # so every call in flight is cancelled and no task outlives the guard.
            await asyncio.wait({task}, timeout=max(left, 0.0))
            if not task.done():
                timed_out = True
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not timed_out:
                    raise  # the caller was cancelled, not the deadline
            except Exception as exc:  # noqa: BLE001 - a guard answers; the failure is its reason
                progress.failure = redact(f"{type(exc).__name__}: {exc}")
        finally:
            if not task.done():  # the caller was cancelled while waiting
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await _cancel_shared_calls(steps)
    finally:
        if own:
            await lm.aclose()
    result = _decide(
        text,
        progress,
        budget_ms=budget_ms,
        elapsed_ms=(time.monotonic() - t0) * 1000,
        lm_calls=lm.usage.total().lm_calls - calls_before,
        timed_out=timed_out,
        on_timeout=on_timeout,
    )
    if raise_blocked and not result.allowed:
        raise GuardBlocked(result)
    return result


async def _cancel_shared_calls(steps: Steps) -> None:
    """Cancel and await the shared-prompt calls of `steps` still in flight: the guard made these
    steps, so whatever they still run at its deadline is its own to stop (a call whose claims
    were all cancelled is cancelled by the queue itself; this also waits for it to end)."""
    await cancel_in_flight((steps.decomposer, steps.selector, steps.judge))


def _is_model(model: object) -> bool:
    return model is not None and not isinstance(model, str)


def guard(
    answer: str | None = None,
    sources: SourcesArg | None = None,
    **kwargs: Any,
) -> GuardResult:
    """The synchronous form of `aguard` (same arguments): runs its own event loop, or, where one
    is running already, a worker thread with its own. Pass a model name, not a `Model`: a
    `Model` belongs to the event loop that uses it."""
    if _is_model(kwargs.get("model")):
        raise JobInputError(
            "guard(): a Model object belongs to one event loop: pass its name, or use aguard()"
        )
    return _run_sync(aguard(answer, sources, **kwargs))


def _run_sync(coro: Coroutine[Any, Any, GuardResult]) -> GuardResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="veritrail-guard") as pool:
        return pool.submit(asyncio.run, coro).result()


# -- streamed answers -------------------------------------------------------------------------


class GuardedStream:
    """A streamed answer, verified when it completes (`aguard_stream`, `guard_stream`).

    Iterate it (async or sync, as it was made) to get the chunks. Under `on_timeout="pass"` each
    chunk is passed on as it arrives and the answer is verified after the last one; under
    "block" the chunks are held until the whole answer is verified and then given (all of them,
    as they came) only if it is allowed, else `GuardBlocked` is raised and no chunk is given.
    `result` is the decision once the iteration has ended (None before).
    """

    def __init__(
        self,
        chunks: AsyncIterable[str] | Iterable[str],
        sources: SourcesArg | None,
        kwargs: dict[str, Any],
    ) -> None:
        self._chunks = chunks
        self._sources = sources
        self._kwargs = kwargs
        self.result: GuardResult | None = None

    @property
    def _hold(self) -> bool:
        return bool(self._kwargs.get("on_timeout", "pass") == "block")

    async def __aiter__(self) -> AsyncIterator[str]:
        if not isinstance(self._chunks, AsyncIterable):
            raise TypeError("a stream made by guard_stream() is iterated with a plain for")
        held: list[str] = []
        async for chunk in self._chunks:
            held.append(chunk)
            if not self._hold:
                yield chunk
        self.result = await aguard("".join(held), self._sources, **self._kwargs)
        if self._hold:
            if not self.result.allowed:
                raise GuardBlocked(self.result)
            for chunk in held:
                yield chunk

    def __iter__(self) -> Iterator[str]:
        if isinstance(self._chunks, AsyncIterable) or not isinstance(self._chunks, Iterable):
            raise TypeError("a stream made by aguard_stream() is iterated with async for")
        held: list[str] = []
        for chunk in self._chunks:
            held.append(chunk)
            if not self._hold:
                yield chunk
        self.result = guard("".join(held), self._sources, **self._kwargs)
        if self._hold:
            if not self.result.allowed:
                raise GuardBlocked(self.result)
            yield from held


def _check_stream_inputs(sources: SourcesArg, kwargs: Mapping[str, Any]) -> None:
    """A streamed answer's arguments, checked before its first chunk (the answer comes later)."""
    _check_inputs(
        "",
        sources,
        None,
        kwargs.get("claims"),
        kwargs.get("budget_ms", 2000),
        kwargs.get("on_timeout", "pass"),
    )


def aguard_stream(chunks: AsyncIterable[str], sources: SourcesArg, **kwargs: Any) -> GuardedStream:
    """An async stream of answer chunks, verified by `aguard` when it completes (the budget
    counts from the last chunk); `async for` over the returned `GuardedStream`."""
    _check_stream_inputs(sources, kwargs)
    return GuardedStream(chunks, sources, kwargs)


def guard_stream(chunks: Iterable[str], sources: SourcesArg, **kwargs: Any) -> GuardedStream:
    """The synchronous form of `aguard_stream`: a plain `for` over the returned stream."""
    _check_stream_inputs(sources, kwargs)
    if _is_model(kwargs.get("model")):  # refused now, not after the chunks have gone through
        raise JobInputError(
            "guard_stream(): a Model object belongs to one event loop: pass its name, or use "
            "aguard_stream()"
        )
    return GuardedStream(chunks, sources, kwargs)


__all__ = [
    "ClaimStatus",
    "GuardBlocked",
    "GuardOutcome",
    "GuardResult",
    "GuardedClaim",
    "GuardedStream",
    "aguard",
    "aguard_stream",
    "guard",
    "guard_stream",
]
