"""`--executor local`: every job in this process, concurrently, on one event loop.

Jobs with the same model settings share one provider (one connection pool) and one response
cache, and all model calls of the batch share one concurrency budget (`--concurrency`): the
budget is enforced around the provider, below each job's `Model`. Each job still gets its own
`Model` wrapper because the wrapper accounts cost per claim id, and two jobs may both have a
claim called `c1`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..loop import lm_steps, verify_claim
from ..records import Claim, ClaimResult
from ..segment import SentenceIndex
from .jobs import JobState, ModelSpec, oracle_steps

if TYPE_CHECKING:
    from ..lm.base import GenerateConfig, Message, ModelOutput, Provider
    from ..lm.cache import ResponseCache
    from ..lm.model import Model

Record = Callable[[JobState, ClaimResult], None]
"""The driver's callback: record one finished claim of a job (called on the event loop)."""


class _Budgeted:
    """A provider that takes one slot of a shared semaphore per call (the batch's budget).

    Closing it does nothing: the pool closes the real provider once, after every job.
    """

    def __init__(self, inner: Provider, sem: asyncio.Semaphore) -> None:
        self._inner = inner
        self._sem = sem
        self.name = inner.name
        self.model = inner.model

    def __getattr__(self, item: str) -> Any:
        # cache_identity, endpoint, context_window ...: whatever the wrapper asks the provider.
        return getattr(self._inner, item)

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> ModelOutput:
        async with self._sem:
            return await self._inner.generate(messages, config)

    async def aclose(self) -> None:
        return None


class ModelPool:
    """Providers and caches shared by the jobs of one event loop."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._providers: dict[ModelSpec, tuple[Provider, asyncio.Semaphore]] = {}
        self._caches: dict[str | bool, ResponseCache | None] = {}

    def provider(self, spec: ModelSpec) -> Provider:
        """The shared provider of `spec` (built on first use; ValueError for bad options)."""
        key = spec
        if key not in self._providers:
            self._providers[key] = (spec.provider(), asyncio.Semaphore(self.concurrency))
        return self._providers[key][0]

    def model(self, spec: ModelSpec) -> Model:
        """A new `Model` for one job over the shared provider, cache and budget."""
        inner = self.provider(spec)
        sem = self._providers[spec][1]
        if spec.cache not in self._caches:
            self._caches[spec.cache] = spec.open_cache()
        return spec.model(
            _Budgeted(inner, sem),
            cache=self._caches[spec.cache],
            concurrency=self.concurrency,
        )

    async def aclose(self) -> None:
        """Close every provider (connection pools, embedded servers)."""
        for provider, _ in self._providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        self._providers.clear()


class LocalExecutor:
    """Runs the claims of every job concurrently in this process (see the module docstring)."""

    name = "local"

    def __init__(self, *, concurrency: int, max_parallel_claims: int | None = None) -> None:
        self.concurrency = concurrency
        self.max_parallel_claims = max_parallel_claims
        self.calls = 0
        """HTTP requests made (cache hits excluded), for the summary."""

    def run(self, states: Sequence[JobState], record: Record) -> None:
        """Verify what each job has left; `record` is called as each claim finishes."""
        asyncio.run(self._run(states, record))

    async def _run(self, states: Sequence[JobState], record: Record) -> None:
        pool = ModelPool(self.concurrency)
        limit = self.max_parallel_claims
        sem = asyncio.Semaphore(limit) if limit else None
        models: list[Model] = []

        async def job(st: JobState) -> None:
            todo = st.todo()
            if not todo:
                return
            model = None if st.job.oracle_doc is not None else pool.model(st.job.model)
            if model is not None:
                models.append(model)
                steps = lm_steps(model, sample_temperature=st.job.settings.sample_temperature)
            else:
                steps = oracle_steps(st.job.oracle_doc)
            sentences = SentenceIndex(st.job.dag)

            async def one(c: Claim) -> None:
                async with sem if sem is not None else contextlib.nullcontext():
                    r = await verify_claim(st.job.dag, sentences, c, steps, st.config, model=model)
                record(st, r)

            try:
                await asyncio.gather(*(one(c) for c in todo))
            finally:
                if model is not None:
                    st.notes.extend(model.notes)

        try:
            await asyncio.gather(*(job(st) for st in states))
        finally:
            self.calls += sum(m.stats.requests for m in models)
            await pool.aclose()
