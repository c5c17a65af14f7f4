"""The VeriTrail loop (docs/method.md#candidates-and-termination, the paper's Algorithm 1) for one claim, and runs over many.

Per claim: decompose into sub-claims, then iterate evidence selection (`evidence`) → verdict
(`verdict.decide_round`, compression included) → next candidates or stop (`rounds.next_round`,
the three termination conditions in the order 1, 2, 3 of docs/method.md#candidates-and-termination). A run's claims share one
`context.RunContext` (DAG, sentence index, read plans, steps, settings, the models' usage
ledgers). Claims are independent and run concurrently; a claim that fails is recorded with
`termination: error` and never stops the others.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

from ..dag import Dag
from ..lm.base import ProviderError
from ..lm.model import Model, claim_scope
from ..records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SelectionIssue,
    StepCost,
    Termination,
    Verdict,
)
from .config import VerifyConfig
from .context import RunContext
from .evidence import LMEvidenceSelector, SelectionFailed, select_over
from .rounds import first_round, next_round
from .segment import SentenceIndex
from .sharing import sharing_scope
from .steps import Steps
from .subclaims import DecompositionError, LMDecomposer, decompose_claim
from .traceability import error_stages, find_provenance
from .verdict import LMVerdictGenerator, decide_round

OnResult = Callable[[ClaimResult], Awaitable[None] | None]


class StepFailure(RuntimeError):
    """A step could not produce a usable answer for this claim (recorded, not raised to the run)."""


def lm_steps(model: Model, *, sample_temperature: float = 0.2) -> Steps:
    """The default LM-based steps over one model, which they record (`Steps.models`): the run's
    costs are read from its usage ledger.

    Hard prediction calls run at temperature 0; soft-prediction samples (docs/method.md#soft-prediction) at
    `sample_temperature`. The three steps share prompts between claims when the run asks for it
    (`VerifyConfig.claims_per_prompt`, set per claim by `verify_claim_in`; `method.sharing`).
    """
    return Steps(
        LMDecomposer(model),
        LMEvidenceSelector(model, sample_temperature=sample_temperature),
        LMVerdictGenerator(model, sample_temperature=sample_temperature),
        models=(model,),
    )


async def _verify_one(ctx: RunContext, claim: Claim, issues: list[SelectionIssue]) -> ClaimResult:
    """Algorithm 1 for one claim. `issues` is owned by the caller, so the issues met before a
    step failure (unreadable replies above all) stay on the claim's error record too."""
    dag, config, steps = ctx.dag, ctx.config, ctx.steps
    t0 = time.perf_counter()
    subclaims = await decompose_claim(
        steps.decomposer, claim, config.max_decomposition_calls, issues=issues
    )
    state = first_round(dag)
    iterations: list[Iteration] = []
    score: float | None = None
    final: Verdict | None = None
    reasoning = ""
    termination: Termination

    while True:
        carried = state.carried
        plan = ctx.plans.plan(state.to_read)
        try:
            rnd = await select_over(dag, plan.batches, claim, subclaims, steps.selector, config)
        except SelectionFailed as exc:
            issues.extend(exc.issues)
            raise StepFailure(str(exc)) from None
        issues.extend(rnd.issues)

        if not rnd.qualified and not carried:
            # Soft prediction: sentences were proposed but none reached the vote threshold.
            checked = state.checked.union(plan.to_read)
            termination = Termination.NO_QUALIFIED_EVIDENCE
            final, reasoning = (
                None,
                "no sentence was selected by enough samples to count as evidence",
            )
            break

        try:
            decided = await decide_round(ctx, claim, subclaims, rnd, carried, issues)
        except SelectionFailed as exc:  # a compression rerun's reply could not be read
            issues.extend(exc.issues)
            raise StepFailure(str(exc)) from None
        outcome = decided.outcome
        if outcome.verdict is None:
            raise StepFailure(
                f"verdict reply unreadable: {outcome.error}; raw reply: {outcome.raw[:2000]!r}"
            )
        verdict = outcome.verdict
        if decided.called:
            score = decided.score
        elif config.samples > 1:
            score = 0.0

        iterations.append(
            Iteration(
                index=len(iterations) + 1,
                nodes_checked=plan.to_read,
                carried_roots=carried,
                nodes_with_evidence=decided.nodes_with_evidence,
                evidence=decided.evidence,
                summaries=decided.summaries,
                dropped_ids=rnd.dropped_ids,
                verdict=verdict,
                reasoning=outcome.reasoning,
                verdict_called_lm=decided.called,
                compression_reruns=decided.reruns,
                evidence_truncated=decided.truncated,
            )
        )
        state = next_round(state, plan, decided.nodes_with_evidence, verdict, dag, config)
        final, reasoning = verdict, outcome.reasoning
        if state.termination is not None:
            termination, final, checked = state.termination, state.final_verdict, state.checked
            break

    stages, status = error_stages(dag, iterations, final)
    prov: tuple[tuple[str, ...], ...] = ()
    if final in (Verdict.FULLY_SUPPORTED, Verdict.INCONCLUSIVE):
        found = find_provenance(dag, iterations)
        prov = found.paths
        cut = found.issue()
        if cut is not None:
            issues.append(cut)
    return ClaimResult(
        claim=claim,
        subclaims=subclaims,
        verdict=final,
        reasoning=reasoning,
        termination=termination,
        iterations=tuple(iterations),
        provenance=prov,
        error_stages=stages,
        error_stage_status=status,
        cost=Cost(
            nodes_read=len(checked),
            nodes_read_share=len(checked) / len(dag),
            wall_seconds=time.perf_counter() - t0,
        ),
        issues=tuple(issues),
        score=score if config.samples > 1 else None,
    )


def _with_cost(result: ClaimResult, per_step: dict[str, StepCost], wall: float) -> ClaimResult:
    total = sum(per_step.values(), StepCost())
    cost = replace(
        result.cost,
        lm_calls=total.lm_calls,
        cached_calls=total.cached_calls,
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        dollars=total.dollars,
        wall_seconds=wall,
        per_step=per_step,
    )
    return replace(result, cost=cost)


def _failed(claim: Claim, message: str, issues: Sequence[SelectionIssue] = ()) -> ClaimResult:
    return ClaimResult(
        claim=claim,
        subclaims=(),
        verdict=None,
        reasoning="",
        termination=Termination.ERROR,
        iterations=(),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
        error=message,
        issues=tuple(issues),
    )


async def verify_claim(
    dag: Dag,
    sentences: SentenceIndex,
    claim: Claim,
    steps: Steps,
    config: VerifyConfig,
    *,
    model: Model | None = None,
    prior_issues: Sequence[SelectionIssue] = (),
) -> ClaimResult:
    """Verify one claim, as a run of its own (`verify_claim_in` verifies it within a run).

    The claim's cost comes from the steps' models (`Steps.ledger_models`). `model` is deprecated
    (kept for old callers): when given, its usage ledger is read instead. See `verify_claim_in`
    for failures and `prior_issues`.
    """
    ctx = RunContext.create(dag, steps, config, sentences=sentences, model=model)
    return await verify_claim_in(ctx, claim, prior_issues=prior_issues)


async def verify_claim_in(
    ctx: RunContext, claim: Claim, *, prior_issues: Sequence[SelectionIssue] = ()
) -> ClaimResult:
    """Verify one claim of the run `ctx`. Failures of a step or the provider end this claim with
    `termination: error`.

    The claim's cost is read from the run's models' usage ledgers (`RunContext.claim_cost`).
    `prior_issues` (e.g. unreadable replies met while extracting the claim) head the claim's
    issues. Every unreadable model reply of the claim's steps is recorded as an
    `unparseable_reply` issue, also on a claim that then ends in error.
    """
    t0 = time.perf_counter()
    issues: list[SelectionIssue] = list(prior_issues)
    config = ctx.config
    # Shared prompts (`sharing`): the LM steps coalesce this claim's requests with its peers';
    # soft prediction asks per claim (its samples are independent calls by design).
    share = config.claims_per_prompt if config.samples == 1 else 1
    with claim_scope(claim.id), sharing_scope(share, config):
        try:
            result = await _verify_one(ctx, claim, issues)
        except ProviderError as exc:
            # The first line is the cause shared by every claim that met the same failure (the
            # run summary groups claims by it); request-specific detail, if any, follows.
            message = f"{type(exc).__name__}: {exc.cause}"
            if str(exc) != exc.cause:
                message += f"\n{exc}"
            result = _failed(claim, message, issues)
        except (StepFailure, DecompositionError) as exc:
            result = _failed(claim, f"{type(exc).__name__}: {exc}", issues)
        except Exception as exc:  # noqa: BLE001 - one claim's bug must not take down the run
            tb = traceback.format_exc(limit=5)
            result = _failed(claim, f"{type(exc).__name__}: {exc}\n{tb}", issues)
    return _with_cost(result, ctx.claim_cost(claim.id), time.perf_counter() - t0)


def not_started(claim: Claim, cause: str) -> ClaimResult:
    """The result of a claim that was never started because the run had to stop (the endpoint
    refused it: bad key, unknown model). An error, so the next run verifies the claim."""
    return _failed(claim, f"not started: {cause}")


async def verify_claims(
    dag: Dag,
    claims: Sequence[Claim],
    steps: Steps,
    config: VerifyConfig,
    *,
    sentences: SentenceIndex | None = None,
    on_result: OnResult | None = None,
    on_start: Callable[[Claim], None] | None = None,
    stop: Callable[[], str | None] | None = None,
    max_parallel_claims: int | asyncio.Semaphore | None = None,
    model: Model | None = None,
    claim_issues: Mapping[str, Sequence[SelectionIssue]] | None = None,
) -> list[ClaimResult]:
    """Verify claims concurrently as one run (model-call concurrency is bounded by the model
    layer): one `RunContext` is made for the run and shared by its claims.

    Costs come from the steps' models (`lm_steps(model)` records its model). `model` is
    deprecated (kept for old callers): when given, its usage ledger and fatal error are used
    instead of the steps' models'. `sentences` is the run's sentence index (default: a new one).
    See `verify_claims_in` for the other arguments.
    """
    ctx = RunContext.create(dag, steps, config, sentences=sentences, model=model)
    return await verify_claims_in(
        ctx,
        claims,
        on_result=on_result,
        on_start=on_start,
        stop=stop,
        max_parallel_claims=max_parallel_claims,
        claim_issues=claim_issues,
    )


async def verify_claims_in(
    ctx: RunContext,
    claims: Sequence[Claim],
    *,
    on_result: OnResult | None = None,
    on_start: Callable[[Claim], None] | None = None,
    stop: Callable[[], str | None] | None = None,
    max_parallel_claims: int | asyncio.Semaphore | None = None,
    claim_issues: Mapping[str, Sequence[SelectionIssue]] | None = None,
) -> list[ClaimResult]:
    """Verify claims of the run `ctx` concurrently.

    `on_start` is told when a claim starts (progress counts it in flight from then on, also while
    its first call is being retried); `on_result` is called as each claim finishes (run stores,
    progress). Before a claim starts, `stop` is asked whether the run must stop (default: a fatal
    endpoint error of the run's models, `RunContext.fatal_cause`); when it names a cause, the
    claim is not started and comes back as an error (`not_started`), so a later run verifies it.
    Results come back in the order of `claims`. `claim_issues` maps claim ids to issues recorded
    before verification (`extraction.ExtractionResult.issues_by_claim`); they head each claim's
    issues. `max_parallel_claims` bounds the claims being verified at once: a number for this
    call, or a semaphore shared with other calls (`veritrail batch` bounds all its jobs with one).
    """
    before = claim_issues or {}
    if isinstance(max_parallel_claims, asyncio.Semaphore):
        sem: asyncio.Semaphore | None = max_parallel_claims
    else:
        sem = asyncio.Semaphore(max_parallel_claims) if max_parallel_claims else None
    must_stop = stop if stop is not None else ctx.fatal_cause

    async def run(c: Claim) -> ClaimResult:
        cause = must_stop()
        if cause is not None:
            return not_started(c, cause)
        if on_start is not None:
            on_start(c)
        return await verify_claim_in(ctx, c, prior_issues=before.get(c.id, ()))

    async def one(c: Claim) -> ClaimResult:
        if sem is None:
            r = await run(c)
        else:
            async with sem:
                r = await run(c)
        if on_result is not None:
            maybe = on_result(r)
            if inspect.isawaitable(maybe):
                await maybe
        return r

    return list(await asyncio.gather(*(one(c) for c in claims)))
