"""The VeriTrail loop (SPEC §4.4, the paper's Algorithm 1) for one claim, and runs over many.

Per claim: decompose into sub-claims, then iterate evidence selection → verdict → candidates until
one of the three termination conditions holds (tested in the order 1, 2, 3 of SPEC §4.4).
Claims are independent and run concurrently; a claim that fails is recorded with
`termination: error` and never stops the others.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
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
    SentenceRef,
    StepCost,
    Termination,
    Verdict,
)
from .config import VerifyConfig
from .evidence import LMEvidenceSelector, SelectionFailed, batch_items, read_plans, select_over
from .segment import SentenceIndex
from .steps import Steps, VerdictOutcome, unreadable_issues
from .subclaims import DecompositionError, LMDecomposer, decompose_claim
from .traceability import error_stages, find_provenance
from .verdict import STEP as VERDICT_STEP
from .verdict import (
    LMVerdictGenerator,
    build_inputs,
    fits,
    judge_with_samples,
    largest_fitting_subset,
)

OnResult = Callable[[ClaimResult], Awaitable[None] | None]


class StepFailure(RuntimeError):
    """A step could not produce a usable answer for this claim (recorded, not raised to the run)."""


def lm_steps(model: Model, *, sample_temperature: float = 0.2) -> Steps:
    """The default LM-based steps over one model.

    Hard prediction calls run at temperature 0; soft-prediction samples (SPEC §4.6) at
    `sample_temperature`.
    """
    return Steps(
        LMDecomposer(model),
        LMEvidenceSelector(model, sample_temperature=sample_temperature),
        LMVerdictGenerator(model, sample_temperature=sample_temperature),
    )


class _ClaimState:
    """Mutable per-claim state of Algorithm 1 (kept small: ids and sentence refs only).

    `issues` is owned by the caller, so the issues met before a step failure (unreadable replies
    above all) stay on the claim's error record too.
    """

    def __init__(self, issues: list[SelectionIssue]) -> None:
        self.checked: set[str] = set()
        self.roots_with_ev: dict[str, list[SentenceRef]] = {}
        self.consec_nfs = 0
        self.iterations: list[Iteration] = []
        self.issues = issues
        self.score: float | None = None


async def _verify_one(
    dag: Dag,
    sentences: SentenceIndex,
    claim: Claim,
    steps: Steps,
    config: VerifyConfig,
    issues: list[SelectionIssue],
) -> ClaimResult:
    st = _ClaimState(issues)
    t0 = time.perf_counter()
    subclaims = await decompose_claim(
        steps.decomposer, claim, config.max_decomposition_calls, issues=st.issues
    )
    nodes_to_check: set[str] = set(dag.sources(dag.terminal))
    final: Verdict | None = None
    reasoning = ""
    termination: Termination

    plans = read_plans(dag, sentences, config)

    while True:
        carried = sorted(n for n in nodes_to_check if n in st.roots_with_ev)
        plan = plans.plan(nodes_to_check - st.roots_with_ev.keys())
        to_read = plan.to_read
        try:
            rnd = await select_over(dag, plan.batches, claim, subclaims, steps.selector, config)
        except SelectionFailed as exc:
            st.issues.extend(exc.issues)
            raise StepFailure(str(exc)) from None
        st.issues.extend(rnd.issues)
        evidence, summaries, with_ev = rnd.evidence, rnd.summaries, rnd.nodes_with_evidence

        if not rnd.qualified and not carried:
            # Soft prediction: sentences were proposed but none reached the vote threshold.
            st.checked.update(to_read)
            termination = Termination.NO_QUALIFIED_EVIDENCE
            final, reasoning = (
                None,
                "no sentence was selected by enough samples to count as evidence",
            )
            break

        reruns = 0
        truncated = False
        if not evidence and not carried:
            outcome = VerdictOutcome(
                Verdict.NOT_FULLY_SUPPORTED, "No evidence was found in the nodes checked."
            )
            called = False
        else:
            inputs = build_inputs(dag, sentences, evidence, summaries, carried)
            fit = fits(inputs, sentences, config)  # measured once per input (segments summaries)
            # Compression (SPEC §4.3): re-run selection on the selected evidence until it fits.
            while not fit and reruns < config.max_compression_reruns and evidence:
                reruns += 1
                by_node: dict[str, tuple[list[int], list[str]]] = {}
                for r in evidence:
                    idx, txt = by_node.setdefault(r.node_id, ([], []))
                    idx.append(r.sentence_index)
                    txt.append(r.text)
                items = [(n, idx, txt) for n, (idx, txt) in by_node.items()]
                try:
                    comp = await select_over(
                        dag,
                        batch_items(
                            [it for it in items if dag.is_root(it[0])],
                            [it for it in items if not dag.is_root(it[0])],
                            config,
                        ),
                        claim,
                        subclaims,
                        steps.selector,
                        config,
                    )
                except SelectionFailed as exc:
                    st.issues.extend(exc.issues)
                    raise StepFailure(str(exc)) from None
                st.issues.extend(comp.issues)
                if len(comp.evidence) >= len(evidence) and comp.nodes_with_evidence == with_ev:
                    evidence, summaries = comp.evidence, comp.summaries
                    inputs = build_inputs(dag, sentences, evidence, summaries, carried)
                    fit = fits(inputs, sentences, config)
                    break  # no progress: further reruns would not shrink it
                evidence, summaries, with_ev = (
                    comp.evidence,
                    comp.summaries,
                    comp.nodes_with_evidence,
                )
                inputs = build_inputs(dag, sentences, evidence, summaries, carried)
                fit = fits(inputs, sentences, config)
            if not fit:
                inputs = largest_fitting_subset(inputs, sentences, config)
                truncated = True
            if not inputs:
                outcome = VerdictOutcome(
                    Verdict.NOT_FULLY_SUPPORTED, "No evidence fits the verdict size limit."
                )
                called = False
            else:
                outcome, score = await judge_with_samples(
                    steps.judge, claim, subclaims, inputs, config
                )
                st.issues.extend(unreadable_issues(VERDICT_STEP, outcome.unreadable))
                st.score = score
                called = True
        if outcome.verdict is None:
            raise StepFailure(
                f"verdict reply unreadable: {outcome.error}; raw reply: {outcome.raw[:2000]!r}"
            )
        verdict = outcome.verdict
        if not called and config.samples > 1:
            st.score = 0.0

        st.iterations.append(
            Iteration(
                index=len(st.iterations) + 1,
                nodes_checked=tuple(to_read),
                carried_roots=tuple(carried),
                nodes_with_evidence=with_ev,
                evidence=evidence,
                summaries=summaries,
                dropped_ids=rnd.dropped_ids,
                verdict=verdict,
                reasoning=outcome.reasoning,
                verdict_called_lm=called,
                compression_reruns=reruns,
                evidence_truncated=truncated,
            )
        )
        st.checked.update(to_read)
        # One pass over the evidence (not one per root: a wide round has thousands of roots).
        fresh_roots: dict[str, list[SentenceRef]] = {}
        for r in evidence:
            if r.node_id in plan.roots:
                if r.node_id not in fresh_roots:
                    fresh_roots[r.node_id] = st.roots_with_ev[r.node_id] = []
                fresh_roots[r.node_id].append(r)

        final, reasoning = verdict, outcome.reasoning
        if verdict is Verdict.NOT_FULLY_SUPPORTED:
            st.consec_nfs += 1
        else:
            st.consec_nfs = 0
        if st.consec_nfs >= config.q:
            # Rule 3 ends the loop unless rule 1 or 2 holds first; both need every new candidate
            # to be checked already or a carried root, so stop at the first one that is not
            # rather than build the candidate set (after a widening round at GraphRAG scale it
            # would hold ~100,000 nodes).
            roots = st.roots_with_ev
            if any(s not in st.checked and s not in roots for s in plan.iter_sources()):
                termination = Termination.Q_CONSECUTIVE_NFS
            elif roots:
                termination = Termination.ROOTS_ONLY
            else:
                termination = Termination.NO_CANDIDATES
            final = Verdict.NOT_FULLY_SUPPORTED
            break
        candidates: AbstractSet[str] = (
            plan.sources()
            if verdict is Verdict.NOT_FULLY_SUPPORTED
            else dag.sources_of_all(with_ev)
        )
        nodes_to_check = set(candidates)
        nodes_to_check.difference_update(st.checked)
        nodes_to_check.update(st.roots_with_ev)
        if nodes_to_check and nodes_to_check == st.roots_with_ev.keys():
            termination = Termination.ROOTS_ONLY
            break
        if not nodes_to_check:
            termination = Termination.NO_CANDIDATES
            final = Verdict.NOT_FULLY_SUPPORTED
            break

    stages, status = error_stages(dag, st.iterations, final)
    prov: tuple[tuple[str, ...], ...] = ()
    if final in (Verdict.FULLY_SUPPORTED, Verdict.INCONCLUSIVE):
        found = find_provenance(dag, st.iterations)
        prov = found.paths
        cut = found.issue()
        if cut is not None:
            st.issues.append(cut)
    return ClaimResult(
        claim=claim,
        subclaims=subclaims,
        verdict=final,
        reasoning=reasoning,
        termination=termination,
        iterations=tuple(st.iterations),
        provenance=prov,
        error_stages=stages,
        error_stage_status=status,
        cost=Cost(
            nodes_read=len(st.checked),
            nodes_read_share=len(st.checked) / len(dag),
            wall_seconds=time.perf_counter() - t0,
        ),
        issues=tuple(st.issues),
        score=st.score if config.samples > 1 else None,
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
    """Verify one claim. Failures of a step or the provider end this claim with `termination: error`.

    `model`, when given, is the model whose usage ledger holds this claim's cost. `prior_issues`
    (e.g. unreadable replies met while extracting the claim) head the claim's issues. Every
    unreadable model reply of the claim's steps is recorded as an `unparseable_reply` issue, also
    on a claim that then ends in error.
    """
    t0 = time.perf_counter()
    issues: list[SelectionIssue] = list(prior_issues)
    with claim_scope(claim.id):
        try:
            result = await _verify_one(dag, sentences, claim, steps, config, issues)
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
    per_step = model.usage.for_claim(claim.id) if model is not None else {}
    return _with_cost(result, per_step, time.perf_counter() - t0)


def not_started(claim: Claim, cause: str) -> ClaimResult:
    """The result of a claim that was never started because the run had to stop (the endpoint
    refused it: bad key, unknown model). An error, so the next run verifies the claim."""
    return _failed(claim, f"not started: {cause}")


def fatal_cause(model: Model | None) -> str | None:
    """Why no further claim can be verified with `model` (`Model.fatal`), or None."""
    fatal = model.fatal if model is not None else None
    return None if fatal is None else f"{type(fatal).__name__}: {fatal.cause}"


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
    """Verify claims concurrently (model-call concurrency is bounded by the model layer).

    `on_start` is told when a claim starts (progress counts it in flight from then on, also while
    its first call is being retried); `on_result` is called as each claim finishes (run stores,
    progress). Before a claim starts, `stop` is asked whether the run must stop (default: the
    model's fatal endpoint error, `Model.fatal`); when it names a cause, the claim is not started
    and comes back as an error (`not_started`), so a later run verifies it. Results come back in
    the order of `claims`. `claim_issues` maps claim ids to issues recorded before verification
    (`extraction.ExtractionResult.issues_by_claim`); they head each claim's issues.
    `max_parallel_claims` bounds the claims being verified at once: a number for this call, or
    a semaphore shared with other calls (`veritrail batch` bounds all its jobs with one).
    """
    before = claim_issues or {}
    index = sentences or SentenceIndex(dag)
    if isinstance(max_parallel_claims, asyncio.Semaphore):
        sem: asyncio.Semaphore | None = max_parallel_claims
    else:
        sem = asyncio.Semaphore(max_parallel_claims) if max_parallel_claims else None
    must_stop = stop if stop is not None else (lambda: fatal_cause(model))

    async def run(c: Claim) -> ClaimResult:
        cause = must_stop()
        if cause is not None:
            return not_started(c, cause)
        if on_start is not None:
            on_start(c)
        return await verify_claim(
            dag, index, c, steps, config, model=model, prior_issues=before.get(c.id, ())
        )

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
