"""Executing a job: open (and lock) its run directory, extract claims when none were given,
verify the claims not finished yet with a stop on a fatal endpoint error, and build the report;
record an interruption (status and partial report).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dag import Dag
from ..display import unpriced_models
from ..lm.base import ProviderError
from ..lm.budget import Budget, BudgetExhausted, NoPriceError, check_priced, raise_cap
from ..lm.registry import describe_fatal
from ..outcome import ExitCode, exit_code
from ..records import Claim, ClaimResult, Termination
from ..redaction import redact
from ..report import (
    ReportDoc,
    ReportSource,
    as_report,
    atomic_write_text,
    build_report,
    write_report,
)
from .build import build_model, job_steps
from .ending import RunEnd, end_run
from .fingerprint import stored_settings
from .spec import PARTIAL_REPORT, ClaimExtractionError, Job, JobInputError
from .store import (
    RUN_FILE,
    RunStore,
    RunStoreError,
    Status,
    lock_run_dir,
)

if TYPE_CHECKING:
    from ..lm.model import Model
    from ..method.config import VerifyConfig
    from ..method.segment import SentenceIndex
    from ..method.steps import Steps
    from ..records import SelectionIssue
    from .progress import ProgressReporter


class RunState:
    """What an interrupt handler and the end-of-run summary need to know about a run."""

    def __init__(self) -> None:
        self.store: RunStore | None = None
        self.fatal: str | None = None
        """The fatal endpoint error that stopped the run (redacted), if one did."""
        self.report_file: Path | None = None
        """The run directory's copy of the final report, as `run_job` wrote it."""
        self.config: VerifyConfig | None = None
        """The run's one `VerifyConfig` (settings fitted to the model's context window), built
        by `run_job` before any claim starts; the partial and the final report record it."""
        self.interruption: Interruption | None = None
        """What `run_to_report` recorded when the run was interrupted (None: not interrupted, or
        interrupted before any claim started)."""
        self.budget: Budget | None = None
        """The run's spending cap (`--max-cost`, `--max-tokens`), when one was given."""

    @property
    def budget_reached(self) -> str | None:
        """Why the cap stopped the run (`Budget.reached`), if it did."""
        return self.budget.reached if self.budget is not None else None


def _fatal_of(model: Model | None) -> BaseException | None:
    """The endpoint error that made `model` refuse every further call (`Model.fatal`), if any."""
    if model is None:
        return None
    fatal = getattr(model, "fatal", None)
    return fatal if isinstance(fatal, BaseException) else None


def _endpoint(job: Job, model: Model | None) -> str | None:
    if job.settings.base_url:
        return job.settings.base_url
    return model.endpoint if model is not None else None


def _write_dag_copy(p: Path, dag_bytes: bytes) -> None:
    """Keep a DAG given in memory in the run directory (`veritrail resume` reads it there)."""
    if p.is_file() and p.read_bytes() == dag_bytes:
        return
    atomic_write_text(p, dag_bytes.decode("utf-8"))


async def open_run_store(
    job: Job,
    model: Model | None,
    *,
    extracting: Callable[[], None] | None = None,
    refuse_other_run: bool = True,
) -> RunStore:
    """Create or reopen the job's run directory, extracting claims first when none were given
    and no earlier run of the same job extracted them: the one way `veritrail verify`,
    `resume`, the API and a batch's driver open a run store.

    The directory is locked before any of its files is read or written, and before any model
    call: a second process on the same directory stops here (exit 2) and spends nothing.
    `extracting` is called just before claims are extracted (progress); a DAG given in memory
    (`job.dag_bytes`) is kept in the run directory; `refuse_other_run` refuses a directory
    holding another run before extracting (else `RunStore.create_or_open` refuses it, in its
    words). Raises `RunStoreError` and, from claim extraction, `ProviderError`.
    """
    lock = lock_run_dir(job.run_dir)
    extra = store_extra(job)
    try:
        claims = job.claims
        if (job.run_dir / RUN_FILE).exists() and (claims is None or refuse_other_run):
            existing = RunStore.open(job.run_dir)
            same = existing.info.fingerprint == job.fingerprint
            if not same and refuse_other_run:
                raise RunStoreError(
                    f"{job.run_dir} holds a different run (the DAG, claims, model or settings "
                    "differ). Use another --run-dir or delete that directory."
                )
            if same and claims is None:
                claims = existing.claims  # extracted by an earlier run: reuse them
        if job.dag_bytes is not None:
            _write_dag_copy(Path(job.dag_path), job.dag_bytes)
        if claims is None:
            assert model is not None
            if extracting is not None:
                extracting()
            claims, kept = await extract_claims(
                model, job.dag, job.settings.question, job.settings.extraction
            )
            extra.update(kept)
        return RunStore.create_or_open(
            job.run_dir,
            fingerprint=job.fingerprint,
            dag_path=job.dag_path,
            dag_sha256=job.dag_sha256,
            model=job.model_name,
            config={**stored_settings(job.settings), **job.result_config()},
            claims=claims,
            claims_path=job.claims_path,
            extra=extra,
            lock=lock,
        )
    except BaseException:
        lock.release()
        raise


def store_extra(job: Job) -> dict[str, Any]:
    """run.json's `extra` for a job: what `veritrail resume` needs beyond the fingerprint (and
    a batch job's id)."""
    extra: dict[str, Any] = {
        "oracle_path": str(Path(job.oracle_path).resolve()) if job.oracle_path else None,
        "claims_given": job.claims is not None,
        "dag_path_given": job.dag_path,
        "out_path": str(job.out_path.resolve()) if job.out_path is not None else None,
        "html_path": str(job.html_path.resolve()) if job.html_path else None,
    }
    if job.batch_id is not None:
        extra["batch_job"] = job.batch_id
    return extra


async def extract_claims(
    model: Model, dag: Dag, question: str | None, mode: str = "batched"
) -> tuple[list[Claim], dict[str, Any]]:
    """The claims of `dag`'s final output, and what run.json keeps about their extraction:
    `extraction_cost` (the calls made outside any claim) and `extraction_issues` (unreadable
    replies met while extracting a claim head that claim's issues, so a resumed run still
    reports them). Shared by `veritrail verify` and `veritrail batch`; raises `ProviderError`.
    `mode` is the `extraction` setting (`method.extraction.ExtractionMode`)."""
    from ..method.extraction import ExtractionConfig, ExtractionMode, LMClaimSource

    config = ExtractionConfig(mode=ExtractionMode(mode))
    source = LMClaimSource(model, question=question, config=config)
    claims = await source.claims_for(dag.node(dag.terminal).text)
    if source.last is not None:
        from ..method.extraction import SentenceOutcome

        failed = [t for t in source.last.trace if t.outcome is SentenceOutcome.ERROR]
        if failed:
            # A sentence whose replies could not be read yields no claim: verifying the others
            # and exiting 0 would pass an answer whose unread part was never checked.
            raise ClaimExtractionError(
                f"claims could not be extracted from {len(failed)} of "
                f"{len(source.last.trace)} sentences of the final output "
                f"({redact(str(failed[0].error or 'unreadable reply'))[:200]}). Run the same "
                "command again (readable replies are cached), or give the claims with --claims."
            )
    kept: dict[str, Any] = {"extraction_cost": _cost_dict(model.usage.for_claim(None).values())}
    if source.last is not None:
        kept["extraction_issues"] = {
            cid: [i.to_json() for i in got] for cid, got in source.last.issues_by_claim().items()
        }
    return claims, kept


def _cost_dict(costs: Any) -> dict[str, Any]:
    """Totals of `StepCost`s as the report's cost fields."""
    out = {"lm_calls": 0, "cached_calls": 0, "input_tokens": 0, "output_tokens": 0, "dollars": 0.0}
    for c in costs:
        out["lm_calls"] += c.lm_calls
        out["cached_calls"] += c.cached_calls
        out["input_tokens"] += c.input_tokens
        out["output_tokens"] += c.output_tokens
        out["dollars"] += c.dollars
    out["dollars"] = round(out["dollars"], 6)
    return out


def _cancel_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C: cancel the run so finally-blocks and the resume hint run."""
    task = asyncio.current_task()
    if task is None:
        return
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        # Not available on Windows event loops, nor outside the main thread.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def verify_until_fatal(
    dag: Dag,
    claims: Sequence[Claim],
    steps: Steps,
    config: VerifyConfig,
    *,
    cause: Callable[[], str | None],
    on_start: Callable[[Claim], None],
    on_result: Callable[[ClaimResult], None],
    max_parallel_claims: int | asyncio.Semaphore | None,
    claim_issues: Mapping[str, Sequence[SelectionIssue]] | None,
    sentences: SentenceIndex | None = None,
) -> None:
    """Verify `claims` with a stop on a fatal endpoint error: the one way `veritrail verify`,
    the batch's local executor and a Ray shard verify claims.

    `loop.verify_claims` schedules them: a claim counts as in flight from the moment it starts
    (`on_start`: progress shows a claim whose call is being retried), and once `cause` names a
    fatal endpoint error (bad key, unknown model) no further claim is started; those are
    recorded as errors naming the cause and verified again by the next run. `cause` is also
    asked after each finished claim (after `on_result`), so the error that claim met is noticed
    (and recorded by `cause`, where the caller records it) as the claim ends.
    """
    from ..method.loop import verify_claims
    from ..method.segment import SentenceIndex

    def finished(r: ClaimResult) -> None:
        on_result(r)
        cause()

    await verify_claims(
        dag,
        claims,
        steps,
        config,
        sentences=sentences if sentences is not None else SentenceIndex(dag),
        on_start=on_start,
        on_result=finished,
        stop=cause,
        max_parallel_claims=max_parallel_claims,
        claim_issues=claim_issues,
    )


async def _verify_remaining(
    job: Job,
    store: RunStore,
    steps: Steps,
    config: VerifyConfig,
    model: Model | None,
    progress: ProgressReporter,
    state: RunState,
) -> None:
    """Verify the claims not finished yet (never run, or ended in error last time), recording
    each in the run store and the fatal endpoint error (`Model.fatal`) in `state`."""
    from ..records import SelectionIssue
    from .gcpolicy import engine_gc

    endpoint = _endpoint(job, model)

    def fatal_cause() -> str | None:
        if state.fatal is None:
            exc = _fatal_of(model)
            if exc is not None:
                state.fatal = describe_fatal(exc, endpoint)
        # A reached cap stops new claims as a fatal error does; it is not the endpoint's fault,
        # so it is kept apart from `state.fatal` (the claims not started name it as their cause).
        return state.fatal or state.budget_reached

    def on_result(r: ClaimResult) -> None:
        store.record(r)
        progress.claim_finished(r)

    stored = store.info.extra.get("extraction_issues") or {}
    with engine_gc():
        await verify_until_fatal(
            job.dag,
            store.remaining(),
            steps,
            config,
            cause=fatal_cause,
            on_start=lambda c: progress.claim_started(c.id),
            on_result=on_result,
            max_parallel_claims=job.settings.max_parallel_claims,
            claim_issues={
                cid: [SelectionIssue.from_json(i) for i in items] for cid, items in stored.items()
            },
        )


async def run_job(
    job: Job,
    progress: ProgressReporter,
    state: RunState,
    *,
    handle_sigterm: bool = True,
) -> dict[str, Any]:
    """Run (or finish) the job and return the report; the model is closed at the end.

    Raises `JobInputError` (unreadable oracle, unknown provider option, a run directory that
    holds another run or is locked by another process) and `ClaimExtractionError`; Ctrl-C and
    SIGTERM (`handle_sigterm`: the CLI's, not an embedding program's) surface as
    `KeyboardInterrupt`/`asyncio.CancelledError` with every finished claim saved
    (`record_interruption`).
    The job's `prompt_dir` applies to this run only (`method.prompting.prompt_dir`).
    """
    from ..method.prompting import prompt_dir

    with prompt_dir(job.settings.prompt_dir):
        return await _run_job(job, progress, state, handle_sigterm=handle_sigterm)


async def _run_job(
    job: Job,
    progress: ProgressReporter,
    state: RunState,
    *,
    handle_sigterm: bool = True,
) -> dict[str, Any]:
    from ..method.config import fit_to_context, model_context_window

    config = job.settings.verify_config()
    try:
        model = None if job.oracle_path else build_model(job)
    except ValueError as exc:  # an unknown provider, or an option it does not take
        raise JobInputError(str(exc)) from None
    budget = job.settings.budget()
    if model is not None and budget is not None:
        try:
            check_priced(model.name, model.price, budget)  # before any call: exit 2
        except NoPriceError as exc:
            await model.aclose()
            raise JobInputError(redact(str(exc))) from None
        model.budget = budget
    state.budget = budget
    if model is not None:
        config = fit_to_context(config, model_context_window(model.provider))
    # Built once: the partial report (`record_interruption`) and the final one record this object.
    state.config = config
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    if handle_sigterm:
        _cancel_on_sigterm()
    ticker = asyncio.create_task(progress.ticker())
    try:
        if model is not None:
            model.on_call = progress.call
            provider = model.provider  # its `status`, if any, says what it does between calls
            progress.activity = lambda: getattr(provider, "status", None)
            progress.figures.unpriced = unpriced_models(model.notes)
        steps = job_steps(job, model)  # reads the oracle file: fail before touching the run dir
        try:
            store = await open_run_store(job, model, extracting=progress.extracting)
        except RunStoreError as exc:
            raise JobInputError(redact(str(exc))) from None
        except BudgetExhausted as exc:
            raise ClaimExtractionError(
                f"{exc.cause} while extracting claims: no claim was verified. Run the same "
                "command again with a higher cap (the calls made are cached)"
            ) from None
        except ProviderError as exc:
            # Claim-level failures are recorded per claim; this is one outside any claim (claim
            # extraction): no claim can be verified without it.
            raise ClaimExtractionError(
                "claims could not be extracted: "
                + describe_fatal(exc, job.settings.base_url)
                + ". Fix the endpoint and run the same command again."
            ) from None
        state.store = store
        store.set_status(Status.RUNNING)
        finished = [r for r in store.results_in_order() if r.termination is not Termination.ERROR]
        progress.start(
            len(store.claims), resumed=len(finished), done=finished, retrying=len(store.errored)
        )
        try:
            await _verify_remaining(job, store, steps, config, model, progress, state)
        finally:
            ticker.cancel()
            progress.close()
        ended = end_run(
            job,
            store,
            config,
            RunEnd(
                started=started,
                wall_seconds=time.perf_counter() - t0,
                resumed_claims=len(finished),
                notes=tuple(model.notes) + _budget_note(state) if model is not None else (),
                fatal=state.fatal,
            ),
            model_name=job.model_name,
        )
        state.report_file = ended.report_file
        report = ended.report
        return report
    finally:
        ticker.cancel()
        if model is not None:
            await model.aclose()


def _budget_note(state: RunState) -> tuple[str, ...]:
    """The report's note of a run the cap stopped (its `run.notes`), if it did."""
    reached = state.budget_reached
    if reached is None:
        return ()
    return (f"{reached}: claims not verified are recorded with this cause",)


def budget_line(report: ReportSource, budget: Budget, run_dir: Path | str) -> str:
    """The one line a run the cap stopped ends with: how far it got and how to go on."""
    claims = as_report(report).claims  # the typed report, as every reader of reports reads it
    done = sum(1 for c in claims if not c.errored)
    left = len(claims) - done
    return (
        f"budget reached: {done} of {len(claims)} claims verified; resume with a higher cap "
        f"(veritrail resume {run_dir} {raise_cap(budget, done, left)})"
    )


def write_partial_report(job: Job, store: RunStore, config: VerifyConfig) -> Path | None:
    """The report of the claims finished so far, in the run directory (for a look meanwhile);
    `config` is the run's (`RunState.config`), so it equals the final report's."""
    results = store.results_in_order()
    if not results:
        return None
    report = build_report(
        results,
        job.dag,
        model=job.model_name,
        config=dataclasses.asdict(config),
        run={"partial": True, "claims_total": len(store.claims)},
        dag_path=job.dag_path,
    )
    from ..runs.reviewing import report_with_reviews

    path = job.run_dir / PARTIAL_REPORT
    write_report(report_with_reviews(report, job.run_dir), path)
    return path


@dataclass(frozen=True, slots=True)
class Interruption:
    """Where an interrupted run stands (all of it is saved in the run directory)."""

    done: int
    total: int
    partial_report: Path | None


def record_interruption(job: Job, state: RunState) -> Interruption | None:
    """Mark an interrupted run as such and write its partial report; None when it was
    interrupted before any claim was started (nothing to record)."""
    store = state.store
    if store is None:
        return None
    store.set_status(Status.INTERRUPTED)
    # The store opens after the config is built, so a run with a store always has it.
    config = state.config if state.config is not None else job.settings.verify_config()
    return Interruption(
        len(store.done), len(store.claims), write_partial_report(job, store, config)
    )


def interruption_of(job: Job) -> Interruption | None:
    """Where an interrupted run of `job` stands, read back from its run directory (the source
    of truth, written by `record_interruption` as the run stopped); None when no claim had
    started (no run directory yet)."""
    if not (job.run_dir / RUN_FILE).is_file():
        return None
    try:
        store = RunStore.open(job.run_dir)
    except RunStoreError:
        return None
    partial = job.run_dir / PARTIAL_REPORT
    return Interruption(len(store.done), len(store.claims), partial if partial.is_file() else None)


async def run_to_report(
    job: Job, progress: ProgressReporter, state: RunState, *, handle_sigterm: bool = True
) -> dict[str, Any]:
    """Run the job (`run_job`) and return its final report: the one way the CLI and the API run.

    On Ctrl-C, SIGTERM or cancellation the run is recorded as interrupted (status and partial
    report, `state.interruption`) and the interruption propagates; either way the run
    directory's lock is released before returning, not at process exit, so an embedding process
    (tests, a notebook) can run the same directory again.
    """
    try:
        return await run_job(job, progress, state, handle_sigterm=handle_sigterm)
    except (KeyboardInterrupt, asyncio.CancelledError):
        state.interruption = record_interruption(job, state)
        raise
    finally:
        if state.store is not None:
            state.store.unlock()


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a finished run gave: its report, exit status, the files written and its run
    directory (`run_and_write`)."""

    report: dict[str, Any]
    """The report document, as written (`--out`, the run directory's copy)."""
    doc: ReportDoc
    """The same report, validated once (`report.as_report`): what readers of the outcome read."""
    exit_code: ExitCode
    run_dir: Path
    written: tuple[Path, ...]
    """The JSON (`--out`) and HTML (`--html`) reports written, when the job has them."""
    fatal: str | None
    """The fatal endpoint error that stopped the run (redacted), if one did."""
    budget: str | None = None
    """When the spending cap stopped the run: the line that says so (`budget_line`)."""


async def run_and_write(
    job: Job,
    progress: ProgressReporter,
    *,
    handle_sigterm: bool = True,
    keep_run_dir: bool = True,
) -> RunOutcome:
    """Run the job (`run_to_report`), write its outputs (`write_outputs`) and judge it
    (`outcome.exit_code`): the run of `veritrail verify`, `check` and `resume` and of
    `veritrail.verify`/`check`.

    `keep_run_dir=False`: the run directory is temporary (the API's default, removed by the
    caller), so the report names neither it nor a DAG copied there. Ctrl-C, SIGTERM and
    cancellation propagate, recorded in the run directory (`interruption_of` reads it back).
    """
    from .outputs import write_outputs

    st = RunState()  # the run's own working state; the caller gets the frozen outcome
    report = await run_to_report(job, progress, st, handle_sigterm=handle_sigterm)
    written = st.report_file
    if not keep_run_dir:
        # The temporary run directory (and a DAG copied there) is gone once the caller returns.
        report["run"]["run_dir"] = None
        if job.dag_bytes is not None:
            report["dag"]["path"] = None
        written = None
    write_outputs(job, report, written=written)
    # The finished report is read from here on: validated once, then read as the typed model.
    doc = as_report(report)
    code = exit_code(doc, job.settings.max_unsupported)
    stopped: str | None = None
    if st.budget is not None and st.budget.reached is not None:
        stopped = budget_line(doc, st.budget, job.run_dir)
        code = ExitCode.ERRORS  # claims were left unverified (the cap refused their calls)
    return RunOutcome(
        report=report,
        doc=doc,
        exit_code=code,
        run_dir=job.run_dir,
        written=tuple(p for p in (job.out_path, job.html_path) if p is not None),
        fatal=st.fatal,
        budget=stopped,
    )
