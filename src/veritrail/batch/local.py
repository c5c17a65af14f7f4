"""`--executor local`: every job in this process, concurrently, on one event loop.

Jobs with the same endpoint (`ModelSpec.provider_key`) share one provider (one connection pool),
jobs with the same cache setting one response cache, and all model calls of the batch share one
concurrency budget (`--concurrency`): the budget is enforced around the provider, below each
job's `Model`. Each job still gets its own `Model` wrapper because the wrapper accounts cost per
claim id, and two jobs may both have a claim called `c1`.

Each job's steps are built as `veritrail verify` builds them (`run.build.job_steps`: its plugged
decomposer, selector or judge in place of the LM's), and its claims are scheduled by
`loop.verify_claims`, as in `veritrail verify`, under one `--max-parallel-claims` bound for the
whole batch. A fatal endpoint error (HTTP 401/403, unknown model, no quota) stops every job using
that endpoint at once: the shared provider answers every later call with the same error without
sending it, and no claim of those jobs starts any more (they are recorded as errors
`not started: …` and verified by the next run). A spending cap (`--max-cost`, `--max-tokens`) is
one `lm.budget.Budget` for every job's model: once a call is refused no claim of any job starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..lm.base import EndpointError
from ..method.loop import not_started
from ..method.prompting import prompt_dir
from ..records import ClaimResult
from ..run.execute import verify_until_fatal
from ..run.gcpolicy import engine_gc
from ..run.job import JobInputError, job_steps
from ..run.model_spec import ModelSpec
from .jobs import JobState
from .progress import BatchEvents

if TYPE_CHECKING:
    from ..lm.base import GenerateConfig, Message, ModelOutput, Provider
    from ..lm.budget import Budget
    from ..lm.cache import ResponseCache
    from ..lm.model import Model

Record = Callable[[JobState, ClaimResult], None]
"""The driver's callback: record one finished claim of a job (called on the driver's thread).
The driver's own (`driver._Recorder`) also records groups of encoded claims (`lines`)."""


@dataclass
class _Shared:
    """One endpoint's provider, its slice of the budget, and its fatal error once met."""

    provider: Provider
    sem: asyncio.Semaphore
    fatal: EndpointError | None = None


class _Budgeted:
    """A provider that takes one slot of a shared semaphore per call (the batch's budget) and
    refuses every call once any call through it met a fatal endpoint error (no request is sent).

    Closing it does nothing: the pool closes the real provider once, after every job.
    """

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared
        self._inner = shared.provider
        self.name = self._inner.name
        self.model = self._inner.model

    def __getattr__(self, item: str) -> Any:
        # cache_identity, endpoint, context_window ...: whatever the wrapper asks the provider.
        return getattr(self._inner, item)

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        async with self._shared.sem:
            if self._shared.fatal is not None:
                raise self._shared.fatal
            try:
                return await self._inner.generate(messages, config)
            except EndpointError as exc:
                if self._shared.fatal is None:
                    self._shared.fatal = exc
                raise

    async def aclose(self) -> None:
        return None


class ModelPool:
    """Providers and caches shared by the jobs of one event loop."""

    def __init__(self, concurrency: int, *, budget: Budget | None = None) -> None:
        self.concurrency = concurrency
        self.budget = budget
        """The batch's one spending cap, given to every model the pool makes."""
        self._shared: dict[tuple[str, str | None, int | None], _Shared] = {}
        self._caches: dict[str | bool, ResponseCache | None] = {}

    def _entry(self, spec: ModelSpec) -> _Shared:
        key = spec.provider_key
        if key not in self._shared:
            self._shared[key] = _Shared(spec.provider(), asyncio.Semaphore(self.concurrency))
        return self._shared[key]

    def provider(self, spec: ModelSpec) -> Provider:
        """The shared provider of `spec` (built on first use; ValueError for bad options)."""
        return self._entry(spec).provider

    def fatal(self, spec: ModelSpec) -> EndpointError | None:
        """The fatal endpoint error a call to `spec`'s endpoint met, if any."""
        entry = self._shared.get(spec.provider_key)
        return entry.fatal if entry is not None else None

    def fatal_of(self, spec: ModelSpec, model: Model | None) -> EndpointError | None:
        """The fatal endpoint error that stops a job on `spec`'s endpoint: one a call through
        the shared provider met, or the job's own `model` (`Model.fatal`), if any."""
        return self.fatal(spec) or (model.fatal if model is not None else None)

    def model(self, spec: ModelSpec) -> Model:
        """A new `Model` for one job over the shared provider, cache and budget."""
        entry = self._entry(spec)
        if spec.cache not in self._caches:
            self._caches[spec.cache] = spec.open_cache()
        model = spec.model(
            _Budgeted(entry),
            cache=self._caches[spec.cache],
            concurrency=self.concurrency,
        )
        model.budget = self.budget
        return model

    async def aclose(self) -> None:
        """Close every provider (connection pools, embedded servers)."""
        for entry in self._shared.values():
            with contextlib.suppress(Exception):
                await entry.provider.aclose()
        self._shared.clear()


class LocalExecutor:
    """Runs the claims of every job concurrently in this process (see the module docstring)."""

    name = "local"

    def __init__(
        self,
        *,
        concurrency: int,
        max_parallel_claims: int | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.concurrency = concurrency
        self.max_parallel_claims = max_parallel_claims
        self.budget = budget
        """The batch's spending cap, shared by every job (`run_batch` gives the driver's
        claim extraction the same one)."""
        self.calls = 0
        """HTTP requests made (cache hits excluded), for the summary."""

    def run(self, states: Sequence[JobState], record: Record, events: BatchEvents) -> None:
        """Verify what each job has left; `record` is called as each claim finishes."""
        asyncio.run(self._run(states, record, events))

    async def _run(self, states: Sequence[JobState], record: Record, events: BatchEvents) -> None:
        from ..lm.registry import describe_fatal

        pool = ModelPool(self.concurrency, budget=self.budget)
        limit = self.max_parallel_claims
        claims_sem = asyncio.Semaphore(limit) if limit else None  # one bound for all jobs
        models: list[Model] = []

        async def job(st: JobState) -> None:
            # Each job renders with its own prompt overrides: `job` runs as its own task, so
            # the context variable set here is seen by its claims' tasks only.
            with prompt_dir(st.job.settings.prompt_dir):
                await job_claims(st)

        async def job_claims(st: JobState) -> None:
            todo = st.todo()
            if not todo:
                return
            spec = st.job.model if st.job.uses_model else None
            model = pool.model(spec) if spec is not None else None
            if model is not None:
                models.append(model)
                model.on_call = lambda ev: events.call(st.job.id, ev)
            try:
                # `veritrail verify`'s steps: the oracle's, or the LM's with the job's plugged
                # steps in place (loaded here again over this job's own model).
                steps = job_steps(st.job, model)
            except JobInputError as exc:
                # They loaded on the driver before any call (`driver.open_states`); a plugin
                # that fails only now stops its job's claims, recorded as not started (exit 3,
                # verified by the next run), not the batch.
                for c in todo:
                    r = not_started(c, str(exc))
                    record(st, r)
                    events.claim_finished(st.job.id, r, count_cost=False)
                return

            def stop() -> str | None:
                # Any job's fatal error on this endpoint stops this job too (`events`), as does
                # the first refused call through the shared provider, before its claim ends.
                if spec is None:
                    return None
                if self.budget is not None and self.budget.reached is not None:
                    return self.budget.reached  # the batch's cap: no claim of any job starts
                cause = events.fatal_for(spec)
                if cause is None:
                    exc = pool.fatal_of(spec, model)
                    if exc is not None:
                        cause = events.endpoint_failed(spec, describe_fatal(exc, spec.base_url))
                if cause is not None and st.fatal is None:
                    st.fatal = cause
                return cause

            def on_result(r: ClaimResult) -> None:
                record(st, r)
                events.claim_finished(st.job.id, r, count_cost=False)

            try:
                await verify_until_fatal(
                    st.job.dag,
                    todo,
                    steps,
                    st.config,
                    cause=stop,
                    on_start=lambda c: events.claim_started(st.job.id, c.id),
                    on_result=on_result,
                    max_parallel_claims=claims_sem,
                    claim_issues=st.claim_issues(),
                )
            finally:
                if model is not None:
                    st.notes.extend(model.notes)

        ticker = asyncio.create_task(events.reporter.ticker())
        try:
            with engine_gc():
                await asyncio.gather(*(job(st) for st in states))
        finally:
            ticker.cancel()
            self.calls += sum(m.stats.requests for m in models)
            await pool.aclose()
