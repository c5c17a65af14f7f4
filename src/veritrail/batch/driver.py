"""The driver of a batch: open every job's run store, run an executor, write the reports."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..lm.budget import Budget, NoPriceError, check_priced
from ..method.prompting import prompt_dir
from ..records import ClaimResult
from ..run.job import Job, JobInputError, job_steps
from ..run.model_spec import ModelSpec
from ..run.store import Status
from .jobs import (
    BatchInputError,
    JobState,
    exit_code,
    finish_job,
    fitted_config,
    open_store,
    outcome,
)
from .local import ModelPool, Record
from .progress import BatchEvents
from .summary import (
    INDEX_FILE,
    SUMMARY_FILE,
    JobOutcome,
    summary_document,
    write_index,
    write_summary,
)

if TYPE_CHECKING:
    from ..lm.base import Provider


class Executor(Protocol):
    """Runs the claims the jobs have left and calls `record` for each finished claim.

    An executor may also have `start()` (called by `run_batch` once the jobs are checked, before
    any model call: the Ray executor reaches its cluster there, failing fast) and `stop()`
    (called by `run_batch` however the batch ends, also when `run` never ran; `run` may undo
    `start` itself, so `stop` must be idempotent)."""

    name: str

    def run(self, states: Sequence[JobState], record: Record, events: BatchEvents) -> None:
        """Verify `state.todo()` of every state: schedule each job's claims with
        `loop.verify_claims`, call `record` for each finished claim, tell `events` about claims
        started, calls and fatal endpoint errors, and start no claim on an endpoint that
        `events.fatal_for` names. The driver's `record` also has `record.lines(state, [(claim
        id, run store line)])`, which records a group of claims encoded elsewhere with one
        fsync and returns them (used by the Ray executor when present)."""
        ...


class _Recorder:
    """The driver's `Record`: record a claim in its job's run store (once), write the job's
    report when its last claim is in. `lines` records a group of claims already encoded as run
    store lines with one write and one fsync (the Ray executor's path, `JobState.record_lines`)."""

    def __init__(self, finish: Callable[[JobState], None]) -> None:
        self._finish = finish

    def __call__(self, st: JobState, r: ClaimResult) -> None:
        if st.record(r) and st.complete() and not st.finished:
            self._finish(st)

    def lines(self, st: JobState, entries: Sequence[tuple[str, str]]) -> list[ClaimResult]:
        """Record (claim id, `run.store.result_line`) pairs; returns the claims recorded."""
        results = st.record_lines(entries)
        if results and st.complete() and not st.finished:
            self._finish(st)
        return results


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What `run_batch` produced."""

    exit_code: int
    summary: dict[str, Any]
    outcomes: list[JobOutcome]
    summary_path: Path
    index_path: Path


def open_states(
    jobs: Sequence[Job],
    *,
    concurrency: int,
    events: BatchEvents | None = None,
    connect: Callable[[], None] | None = None,
    budget: Budget | None = None,
) -> list[JobState]:
    """Open (create, or reopen to resume) every job's run store and lock it.

    First every job is checked that can only be checked with its model, before any model call:
    the model can be built, and its plugged steps load (`run.build.job_steps`, as `veritrail verify`
    loads them). Then `connect` is called (the executor's start: a Ray cluster is reached
    before any call, and not started for a batch refused here). Then the stores are opened:
    jobs without a claims file get their claims extracted here, on the driver, all jobs at once
    within the batch's `concurrency` (their calls are shown by `events`). Raises
    `BatchInputError` naming every job refused (exit 2), `jobs.ExtractionFailed` when a job's
    claims cannot be extracted (the other jobs' extractions are stopped, and the run stores
    opened so far are released, marked interrupted). `budget` is the batch's spending cap: claim
    extraction spends from it too, and a dollar cap on a model with no known price is refused
    here, with the other checks.
    """
    ev = events if events is not None else BatchEvents()

    async def go() -> list[JobState]:
        pool = ModelPool(concurrency, budget=budget)
        opened: dict[int, JobState] = {}

        async def open_one(i: int, job: Job) -> None:
            model = None
            if job.claims is None:
                model = pool.model(job.model)
                model.on_call = lambda e: ev.call(None, e)
                ev.extracting()
            with prompt_dir(job.settings.prompt_dir):  # claim extraction's prompt
                store = await open_store(job, model)
            opened[i] = JobState(
                job, store, fitted_config(job, providers[job.id]), resumed=len(store.done)
            )

        tasks: list[asyncio.Task[None]] = []
        try:
            providers = _check_models(jobs, pool)
            _check_priced(jobs, pool, budget)
            if connect is not None:
                connect()
            # Every job's extraction at once, under the pool's one budget (`--concurrency`): one
            # job after the other, 200 answers spent minutes in extraction round trips before
            # any claim was verified (issue 38). The first failure stops the others.
            tasks = [asyncio.create_task(open_one(i, job)) for i, job in enumerate(jobs)]
            if tasks:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in tasks:  # the first failure in manifest order, as when one ran after another
                failed = t.exception() if t.done() and not t.cancelled() else None
                if failed is not None:
                    raise failed
            return [opened[i] for i in range(len(jobs))]
        except BaseException:
            for t in tasks:
                t.cancel()  # a no-op for those done
            # Wait for them, so that no store opens after the ones opened are released.
            await asyncio.gather(*tasks, return_exceptions=True)
            for st in opened.values():
                st.store.set_status(Status.INTERRUPTED)
                st.store.unlock()
            raise
        finally:
            await pool.aclose()

    return asyncio.run(go())


def _check_models(jobs: Sequence[Job], pool: ModelPool) -> dict[str, Provider | None]:
    """Each job's provider (None: answered by its oracle), once every job's model can be built
    and its plugged steps load with it; `BatchInputError` listing the jobs that cannot. No model
    call is made: building a model or loading a step calls nothing."""
    providers: dict[str, Provider | None] = {}
    problems: list[str] = []
    loaded: set[tuple[ModelSpec | None, tuple[tuple[str, str], ...]]] = set()
    for job in jobs:
        spec = job.model if job.uses_model else None
        try:
            providers[job.id] = pool.provider(spec) if spec is not None else None
        except ValueError as exc:  # unknown provider option, bad model name
            problems.append(f"job {job.id}: {exc}")
            continue
        key = (spec, tuple(sorted(job.plugins.items())))
        if not job.plugins or key in loaded:
            continue  # jobs with the same model and plugins load them alike: once is enough
        loaded.add(key)
        try:
            # Built with a model of the job as the executors build them (a factory may use it);
            # these steps are dropped: each executor builds its own over its own models.
            job_steps(job, pool.model(spec) if spec is not None else None)
        except JobInputError as exc:
            problems.append(f"job {job.id}: {exc}")
    if problems:
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise BatchInputError("\n".join(problems[:20]) + more)
    return providers


def _check_priced(jobs: Sequence[Job], pool: ModelPool, budget: Budget | None) -> None:
    """`BatchInputError` (exit 2, before any call) naming the jobs whose model has no known
    price when the batch has a dollar cap (`lm.budget.check_priced`)."""
    if budget is None or budget.max_cost is None:
        return
    problems: list[str] = []
    prices: dict[ModelSpec, str | None] = {}
    for job in jobs:
        spec = job.model if job.uses_model else None
        if spec is None:
            continue  # an oracle costs nothing
        if spec not in prices:
            model = pool.model(spec)  # a wrapper over the shared provider: nothing is called
            try:
                check_priced(model.name, model.price, budget)
                prices[spec] = None
            except NoPriceError as exc:
                prices[spec] = str(exc)
        if prices[spec] is not None:
            problems.append(f"job {job.id}: {prices[spec]}")
    if problems:
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise BatchInputError("\n".join(problems[:20]) + more)


def run_batch(
    jobs: Sequence[Job],
    executor: Executor,
    *,
    manifest: str,
    summary_dir: Path,
    concurrency: int,
    max_unsupported: float | None = None,
    on_job_done: Callable[[JobState], None] | None = None,
    events: BatchEvents | None = None,
    budget: Budget | None = None,
) -> BatchResult:
    """Run every job to the end (or as far as possible) and write the batch's outputs.

    Each finished claim is recorded in its job's run store as it arrives; a job's report is
    written as soon as its last claim is in. A fatal endpoint error stops every job using that
    endpoint (their claims not started are recorded as errors; exit status 3; the causes are in
    `summary["fatal"]`). `events` shows progress (default: nothing shown). On KeyboardInterrupt
    (Ctrl-C, SIGTERM via the CLI) the unfinished run stores are marked interrupted and the
    exception goes on. `budget` is the batch's one spending cap (`--max-cost`, `--max-tokens`),
    for claim extraction here and every job's claims (the local executor is given the same one).
    """
    ev = events if events is not None else BatchEvents()
    t0 = time.perf_counter()
    # An executor that needs a start (Ray: reach the cluster, or start a local one) gets it
    # after the checks that need no cluster and before any model call; `stop` undoes it however
    # the batch ends (`run` undoes it too when it ran).
    start: Callable[[], None] | None = getattr(executor, "start", None)
    stop: Callable[[], None] | None = getattr(executor, "stop", None)
    try:
        states = open_states(jobs, concurrency=concurrency, events=ev, connect=start, budget=budget)
    except BaseException:
        ev.close()
        if stop is not None:
            stop()
        raise

    def finish(st: JobState) -> None:
        finish_job(st, executor=executor.name)
        ev.job_finished(st.job.id)
        if on_job_done is not None:
            on_job_done(st)

    record = _Recorder(finish)

    try:
        for st in states:
            if st.complete():
                finish(st)  # finished by an earlier run that stopped before its report
        ev.start(states)
        todo = [st for st in states if not st.finished]
        if todo:
            executor.run(todo, record, ev)
        for st in states:
            if not st.finished and st.complete():
                finish(st)
    except BaseException:
        for st in states:
            if not st.finished:
                st.store.set_status(Status.INTERRUPTED)
        raise
    finally:
        ev.close()
        if stop is not None:
            stop()  # nothing left to run (or `run` already stopped): a no-op then
    for st in states:
        if not st.finished:
            st.store.set_status(Status.INTERRUPTED)
    outcomes = [outcome(st, max_unsupported) for st in states]
    code = exit_code(outcomes)
    extra: dict[str, Any] = {"fatal": ev.causes()} if ev.causes() else {}
    stats = getattr(executor, "stats", None)
    if stats is not None:
        extra["ray"] = {
            "workers": stats.workers,
            "tasks": stats.tasks,
            "shards_refused": stats.shards_refused,
            "retried_claims": stats.retried_claims,
            "duplicates_dropped": stats.duplicates_dropped,
            "worker_cpu_seconds": round(stats.worker_cpu_seconds, 3),
            "requests": stats.requests,
            "failures": list(stats.failures),
        }
    doc = summary_document(
        outcomes,
        manifest=manifest,
        executor=executor.name,
        exit_code=code,
        wall_seconds=time.perf_counter() - t0,
        extra=extra,
    )
    summary_path = summary_dir / SUMMARY_FILE
    index_path = summary_dir / INDEX_FILE
    write_summary(doc, summary_path)
    write_index(doc, index_path)
    return BatchResult(code, doc, outcomes, summary_path, index_path)
