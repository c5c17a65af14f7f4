"""Dry-run estimate: model calls, tokens and dollars of a run, computed without calling a model.

The estimator replays the loop's traversal (docs/method.md#candidates-and-termination) on the real DAG under two assumptions
about what the model will answer: each round is read with the loop's own `plans.ReadPlan`
(batching included) and followed by the loop's own `rounds.next_round` (candidates and
termination), and the real prompt templates are rendered to count input tokens:

* **estimate** ("widening") — every node read yields evidence and every verdict is Not Fully
  Supported, so each round reads all sources of the previous round, and the claim stops after
  `q` rounds (or when the roots are exhausted). Iteration 1 is exact whatever the model answers
  (it always reads `src(terminal)`); later rounds are exact under this assumption.
* **upper** ("full trail") — every node yields evidence and every verdict is Fully Supported:
  the claim walks the whole ancestry of the terminal node (every ancestor read once), which is
  the method's worst case O(|V|).
* **lower** — one decomposition call and iteration 1's prompts, nothing else.

Decomposition calls are estimated from the claim's wording: 1 when it reads as one assertion,
else 1 + the number of parts (each part is decomposed once more to confirm it is final); parts =
1 + the number of conjunction markers (" and ", ";", " but ", ", which", " while "), capped by
`max_decomposition_calls`. Verdict input is the template plus the full text of evidence roots plus
`SUMMARY_CHARS` characters per non-root evidence node (the summary the selector will write).
Output tokens are fixed per call type (`OUTPUT_TOKENS`). Not included: re-asks after unreadable
replies, retries, and evidence-compression reruns.

Shared prompts (`VerifyConfig.claims_per_prompt` > 1 with `samples` 1, docs/method.md#shared-prompts):
under the assumptions above every claim reads the same batches in the same rounds, so the run's
evidence calls of one batch are the claims in groups of `claims_per_prompt` (the excerpts once per
group, each claim's own text once); verdict prompts likewise, in every round (the union of the
group's evidence: the roots once, each claim's non-root summaries; the union's token bound,
`sharing.UNION_EVIDENCE_TOKENS`, is not applied); decompositions are
grouped by wave (every claim's first statement, then the parts). Per-claim figures stay those of
the one-claim form; the run's lower and estimate totals are the shared ones, its upper bound the
one-claim form's (a claim out of step with its peers, e.g. one whose decomposition takes more
calls, is asked alone: the estimate assumes the claims reach each step together). The embedded models' cap of
`sharing.CONCISE_MAX_CLAIMS` claims per prompt is not applied (the estimate has no model).

Tolerance (tested in tests/run/test_dry_run.py against real runs with the scripted provider): when the
model behaves as assumed, the call counts are exact and input tokens are within 25 %; real runs
land between `lower` and `upper` for evidence and verdict calls. Tokens use `tokens.estimate_tokens`
(4 characters per token), so provider-reported counts differ by the tokenizer's ratio.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..dag import Dag
from ..fencing import fence
from ..lm.pricing import Price
from ..method.config import VerifyConfig
from ..method.evidence import render_excerpts
from ..method.plans import ReadPlan
from ..method.prompting import Prompt, load_prompt
from ..method.rounds import first_round, next_round
from ..method.segment import SentenceIndex
from ..method.steps import EvidenceBatch, VerdictInput
from ..method.subclaims import format_subclaims
from ..method.tokens import estimate_tokens
from ..method.verdict import render_evidence
from ..records import Claim, Step, Verdict

# The steps the estimate counts, under the short names the dry-run printer and tests import.
DECOMPOSITION = Step.DECOMPOSITION
EVIDENCE = Step.EVIDENCE_SELECTION
VERDICT = Step.VERDICT
EXTRACTION = "claim_extraction"
"""Not a `Step`: the estimate's one row for all of claim extraction's calls (selection,
disambiguation and decomposition: per window of terminal sentences in the batched form, per
sentence in the per-sentence form, `EXTRACTION_CALLS_PER_SENTENCE`)."""

OUTPUT_TOKENS: dict[str, int] = {DECOMPOSITION: 40, EVIDENCE: 80, VERDICT: 120, EXTRACTION: 60}
"""Assumed output tokens per call (JSON replies: ids and a short summary, or a verdict)."""

SUMMARY_CHARS = 300
"""Assumed length of the evidence summary of one non-root node in a verdict prompt."""

EXTRACTION_CALLS_PER_SENTENCE = 3
"""Claim extraction (when no claims are given): selection, disambiguation, decomposition."""

_CONJUNCTIONS = re.compile(r"\band\b|;|\bbut\b|,\s*which\b|\bwhile\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """Calls and tokens of one step."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cacheable_input_tokens: int = 0
    """Of `input_tokens`, those that repeat a prompt prefix an earlier call of the run sent (see
    `estimate_run`): what a provider with prompt (prefix) caching can serve from its cache."""

    def __add__(self, other: StepEstimate) -> StepEstimate:
        return StepEstimate(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cacheable_input_tokens + other.cacheable_input_tokens,
        )


@dataclass(frozen=True, slots=True)
class Scenario:
    """Per-step figures of one claim (or a run) under one assumption."""

    steps: dict[str, StepEstimate] = field(default_factory=dict)
    iterations: int = 0
    nodes_read: int = 0

    @property
    def calls(self) -> int:
        """All model calls."""
        return sum(s.calls for s in self.steps.values())

    @property
    def input_tokens(self) -> int:
        """All input tokens."""
        return sum(s.input_tokens for s in self.steps.values())

    @property
    def output_tokens(self) -> int:
        """All output tokens."""
        return sum(s.output_tokens for s in self.steps.values())

    @property
    def cacheable_input_tokens(self) -> int:
        """All input tokens that repeat an earlier call's prompt prefix."""
        return sum(s.cacheable_input_tokens for s in self.steps.values())

    def __add__(self, other: Scenario) -> Scenario:
        keys = dict.fromkeys([*self.steps, *other.steps])
        return Scenario(
            {
                k: self.steps.get(k, StepEstimate()) + other.steps.get(k, StepEstimate())
                for k in keys
            },
            self.iterations + other.iterations,
            self.nodes_read + other.nodes_read,
        )


@dataclass(frozen=True, slots=True)
class ClaimEstimate:
    """The three scenarios for one claim."""

    claim_id: str
    lower: Scenario
    estimate: Scenario
    upper: Scenario


@dataclass(frozen=True, slots=True)
class RunEstimate:
    """The estimate of a whole run; `dollars_*` are None when the model's price is unknown."""

    claims: tuple[ClaimEstimate, ...]
    extraction: StepEstimate
    lower: Scenario
    estimate: Scenario
    upper: Scenario
    dollars_lower: float | None
    dollars_estimate: float | None
    dollars_upper: float | None


def _messages_tokens(messages: Sequence[object]) -> int:
    return sum(estimate_tokens(getattr(m, "content", "")) for m in messages)


_PLACEHOLDER = ""
"""Claim text the traversal's prompts are rendered with; each claim adds its own length."""


class _Prompts:
    """Token counts of the real templates. Prompts are rendered once per batch with an empty
    claim; a claim's own text is added per call (`claim_delta`), since it appears verbatim."""

    def __init__(self) -> None:
        self.evidence = load_prompt("evidence")
        self.verdict = load_prompt("verdict")
        self.decompose = load_prompt("decompose")
        self.evidence_shared = load_prompt("evidence_shared")
        self.verdict_shared = load_prompt("verdict_shared")
        self.decompose_shared = load_prompt("decompose_shared")

    @staticmethod
    def _claim_vars(text: str) -> dict[str, str]:
        return {
            "claim": fence(text, "claim"),
            "subclaims": fence(format_subclaims([text]), "sub-claims"),
        }

    def evidence_tokens(self, batch: EvidenceBatch) -> int:
        msgs = self.evidence.render(
            excerpts=render_excerpts(batch), **self._claim_vars(_PLACEHOLDER)
        )
        return _messages_tokens(msgs)

    def verdict_tokens(self, items: Sequence[VerdictInput]) -> int:
        msgs = self.verdict.render(
            evidence=render_evidence(items), **self._claim_vars(_PLACEHOLDER)
        )
        return _messages_tokens(msgs)

    def evidence_shared_tokens(self, batch: EvidenceBatch) -> int:
        """A shared evidence prompt's tokens without its claims (`claim_delta` adds each)."""
        return _messages_tokens(
            self.evidence_shared.render(excerpts=render_excerpts(batch), claims="")
        )

    def verdict_shared_tokens(self, items: Sequence[VerdictInput]) -> int:
        """A shared verdict prompt's tokens without its claims."""
        return _messages_tokens(
            self.verdict_shared.render(evidence=render_evidence(items), claims="")
        )

    def decompose_shared_tokens(self) -> int:
        """A shared decomposition prompt's tokens without its statements."""
        return _messages_tokens(self.decompose_shared.render(statements=""))

    def claim_delta(self, text: str) -> int:
        """Tokens a claim adds to an evidence or verdict prompt (it appears as claim and as its
        own single sub-claim)."""
        chars = sum(len(v) for v in self._claim_vars(text).values()) - sum(
            len(v) for v in self._claim_vars(_PLACEHOLDER).values()
        )
        return estimate_tokens("x" * chars)

    def system_tokens(self, step: str) -> int:
        """Tokens of a step's system prompt: the prefix every call of that step shares."""
        prompt: dict[str, Prompt] = {
            DECOMPOSITION: self.decompose,
            EVIDENCE: self.evidence,
            VERDICT: self.verdict,
        }
        p = prompt.get(step)
        return estimate_tokens(p.system) if p is not None else 0

    def decompose_tokens(self, text: str) -> int:
        msgs = self.decompose.render(context_block="", statement=fence(text, "statement"))
        return _messages_tokens(msgs)


def decomposition_calls(text: str, max_calls: int) -> int:
    """Estimated decomposition calls for a claim (see the module docstring)."""
    parts = 1 + len(_CONJUNCTIONS.findall(text))
    calls = 1 if parts == 1 else 1 + parts
    return max(1, min(calls, max_calls)) if max_calls > 0 else 0


@dataclass(frozen=True, slots=True)
class _Round:
    """One simulated iteration: prompts and their claim-independent input tokens."""

    evidence_calls: int
    evidence_tokens: int
    verdict_calls: int
    verdict_tokens: int
    nodes_read: int
    evidence_shared_tokens: int = 0
    """The round's evidence prompts in the shared form, without their claims."""
    verdict_shared_tokens: int = 0
    """The round's verdict prompt in the shared form with one claim's evidence, without its
    claims."""
    verdict_own_tokens: int = 0
    """What each further claim of a shared verdict prompt adds as evidence: its own non-root
    summaries (written per claim; the roots it reads are in the prompt once)."""


def _traverse(
    dag: Dag,
    sentences: SentenceIndex,
    config: VerifyConfig,
    prompts: _Prompts,
    *,
    q_limited: bool,
) -> list[_Round]:
    """Replay the loop with evidence in every node read; verdicts NFS (q_limited) or FS.

    The claim does not change which nodes are read under these assumptions, so this runs once
    per run and scenario; claims only add their own text to each prompt.
    """
    assumed = Verdict.NOT_FULLY_SUPPORTED if q_limited else Verdict.FULLY_SUPPORTED
    state = first_round(dag)
    rounds: list[_Round] = []
    while True:
        carried = state.carried
        plan = ReadPlan(dag, sentences, state.to_read, config)
        to_read, batches = plan.to_read, plan.batches
        roots, nonroots = dag.split_roots(to_read)
        v_calls, v_tokens, v_shared, v_own = 0, 0, 0, 0
        if to_read or carried:
            items = [VerdictInput((n,), False, "x" * SUMMARY_CHARS) for n in nonroots]
            items += [
                VerdictInput((n,), True, dag.node(n).text) for n in sorted({*roots, *carried})
            ]
            v_calls, v_tokens = 1, prompts.verdict_tokens(items)
            v_shared = prompts.verdict_shared_tokens(items)
            if nonroots:
                v_own = estimate_tokens(render_evidence(items[: len(nonroots)]))
        # Every node read yields evidence (the assumption), so every root read is carried on.
        state = next_round(state, plan, to_read, assumed, dag, config)
        rounds.append(
            _Round(
                len(batches),
                sum(prompts.evidence_tokens(b) for b in batches),
                v_calls,
                v_tokens,
                len(state.checked),
                sum(prompts.evidence_shared_tokens(b) for b in batches),
                v_shared,
                v_own,
            )
        )
        if state.termination is not None:
            break
    return rounds


def _scenario_steps(
    rounds: Sequence[_Round], delta: int, samples: int, *, verdicts: bool = True
) -> tuple[StepEstimate, StepEstimate]:
    """Evidence and verdict figures of `rounds` for a claim adding `delta` tokens per prompt."""
    k = samples
    ev_calls = sum(r.evidence_calls for r in rounds)
    ev = StepEstimate(
        k * ev_calls,
        k * (sum(r.evidence_tokens for r in rounds) + ev_calls * delta),
        k * ev_calls * OUTPUT_TOKENS[EVIDENCE],
    )
    if not verdicts:
        return ev, StepEstimate()
    v_calls = sum(r.verdict_calls for r in rounds)
    vd = StepEstimate(
        k * v_calls,
        k * (sum(r.verdict_tokens for r in rounds) + v_calls * delta),
        k * v_calls * OUTPUT_TOKENS[VERDICT],
    )
    return ev, vd


@dataclass(frozen=True, slots=True)
class _Traversals:
    widening: list[_Round]
    full: list[_Round]


def _traversals(
    dag: Dag, sentences: SentenceIndex, config: VerifyConfig, prompts: _Prompts
) -> _Traversals:
    return _Traversals(
        _traverse(dag, sentences, config, prompts, q_limited=True),
        _traverse(dag, sentences, config, prompts, q_limited=False),
    )


def estimate_claim(
    dag: Dag,
    sentences: SentenceIndex,
    claim: Claim,
    config: VerifyConfig,
    prompts: _Prompts | None = None,
    traversals: _Traversals | None = None,
) -> ClaimEstimate:
    """The three scenarios for one claim."""
    p = prompts or _Prompts()
    tr = traversals or _traversals(dag, sentences, config, p)
    n_dec = decomposition_calls(claim.text, config.max_decomposition_calls)
    dec_in = p.decompose_tokens(claim.text)
    dec = StepEstimate(n_dec, n_dec * dec_in, n_dec * OUTPUT_TOKENS[DECOMPOSITION])
    dec_low = (
        StepEstimate(1, dec_in, OUTPUT_TOKENS[DECOMPOSITION])
        if config.max_decomposition_calls
        else StepEstimate()
    )
    dec_high_n = max(n_dec, config.max_decomposition_calls)
    dec_high = StepEstimate(
        dec_high_n, dec_high_n * dec_in, dec_high_n * OUTPUT_TOKENS[DECOMPOSITION]
    )
    delta = p.claim_delta(claim.text)
    k = config.samples
    ev1, _ = _scenario_steps(tr.widening[:1], delta, k, verdicts=False)
    ev, vd = _scenario_steps(tr.widening, delta, k)
    ev_u, vd_u = _scenario_steps(tr.full, delta, k)
    return ClaimEstimate(
        claim.id,
        lower=Scenario(
            {DECOMPOSITION: dec_low, EVIDENCE: ev1, VERDICT: StepEstimate()},
            1,
            tr.widening[0].nodes_read,
        ),
        estimate=Scenario(
            {DECOMPOSITION: dec, EVIDENCE: ev, VERDICT: vd},
            len(tr.widening),
            tr.widening[-1].nodes_read,
        ),
        upper=Scenario(
            {DECOMPOSITION: dec_high, EVIDENCE: ev_u, VERDICT: vd_u},
            len(tr.full),
            tr.full[-1].nodes_read,
        ),
    )


def _with_cacheable(s: Scenario, prompts: _Prompts, shared_evidence: int, samples: int) -> Scenario:
    """`s` with `cacheable_input_tokens` filled in: every call of a step after its first repeats
    the step's system prompt; the evidence prompts of every claim but the first repeat the
    excerpts the first claim's prompts sent (`shared_evidence` claim-independent tokens), and
    each soft-prediction sample after the first repeats its whole prompt but the claim."""
    steps: dict[str, StepEstimate] = {}
    for name, st in s.steps.items():
        cacheable = max(0, st.calls - 1) * prompts.system_tokens(name)
        if name == EVIDENCE:
            cacheable = max(cacheable, shared_evidence)
        if samples > 1:
            cacheable = max(cacheable, st.input_tokens * (samples - 1) // samples)
        steps[name] = replace(st, cacheable_input_tokens=min(st.input_tokens, cacheable))
    return Scenario(steps, s.iterations, s.nodes_read)


def _group_sizes(n: int, m: int) -> list[int]:
    """The sizes of the shared prompts `n` claims make at `m` claims per prompt."""
    return [m] * (n // m) + ([n % m] if n % m else [])


def _shared_scenario(
    s: Scenario,
    rounds: Sequence[_Round],
    claims: Sequence[Claim],
    dec_counts: Sequence[int],
    m: int,
    prompts: _Prompts,
    *,
    verdicts: bool,
) -> Scenario:
    """`s` (the sum of the claims' one-claim figures) with the evidence, verdict and
    decomposition steps as the shared form sends them (see the module docstring)."""
    n = len(claims)
    if n < 2:
        return s
    sizes = _group_sizes(n, m)
    g, g1 = len(sizes), sizes.count(1)
    d = sum(prompts.claim_delta(c.text) for c in claims)
    ev_calls = sum(r.evidence_calls for r in rounds) * g
    ev_in = sum(
        (g - g1) * r.evidence_shared_tokens + g1 * r.evidence_tokens + r.evidence_calls * d
        for r in rounds
    )
    steps = dict(s.steps)
    steps[EVIDENCE] = StepEstimate(
        ev_calls, ev_in, n * sum(r.evidence_calls for r in rounds) * OUTPUT_TOKENS[EVIDENCE]
    )
    if verdicts:
        v_calls, v_in = 0, 0
        for r in rounds:
            if not r.verdict_calls:
                continue
            # One prompt per group: the union of its claims' items (the roots once, each
            # claim's own summaries), then the claims.
            v_calls += g
            v_in += (
                (g - g1) * r.verdict_shared_tokens
                + (n - g) * r.verdict_own_tokens
                + g1 * r.verdict_tokens
                + d
            )
        n_verdicts = n * sum(r.verdict_calls for r in rounds)
        steps[VERDICT] = StepEstimate(v_calls, v_in, n_verdicts * OUTPUT_TOKENS[VERDICT])
    base = prompts.decompose_tokens(_PLACEHOLDER)
    shared_base = prompts.decompose_shared_tokens()
    own = [prompts.decompose_tokens(c.text) - base for c in claims]
    d_calls, d_in = 0, 0
    for wave in range(1, max(dec_counts, default=0) + 1):
        items = [k for k, c in enumerate(dec_counts) if c >= wave]
        for size in _group_sizes(len(items), m):
            d_calls += 1
            d_in += base if size == 1 else shared_base
        d_in += sum(own[k] for k in items)
    steps[DECOMPOSITION] = StepEstimate(
        d_calls, d_in, sum(dec_counts) * OUTPUT_TOKENS[DECOMPOSITION]
    )
    return Scenario(steps, s.iterations, s.nodes_read)


def _batched_extraction(sentences: Sequence[str]) -> StepEstimate:
    """Claim extraction in the batched form: three calls per window (`batch_windows`), each
    with ~350 tokens of instructions and the window's numbered text; the second and third also
    list the kept parts, and every reply gives each sentence back (an id, a few tokens of JSON)."""
    from ..method.extraction import ExtractionConfig
    from ..method.extraction_batch import batch_windows

    calls = inputs = outputs = 0
    for w in batch_windows(sentences, ExtractionConfig()):
        shown = sum(estimate_tokens(sentences[i]) + 2 for i in range(w.shown_lo, w.shown_hi))
        answered = sum(estimate_tokens(sentences[i]) + 8 for i in w.targets)
        calls += 3
        inputs += 3 * (350 + shown) + 2 * answered
        outputs += 3 * answered
    return StepEstimate(calls, inputs, outputs)


def estimate_run(
    dag: Dag,
    claims: Sequence[Claim] | None,
    config: VerifyConfig,
    *,
    price: Price | tuple[float, float] | None = None,
    sentences: SentenceIndex | None = None,
    extraction_mode: str = "batched",
) -> RunEstimate:
    """Estimate a run. `claims=None` means claims will be extracted from the terminal node:
    then extraction calls are added (in the form `extraction_mode` names, the `extraction`
    setting) and one claim per terminal sentence is assumed.

    `price` is a `lm.pricing.Price` or (USD per 1M input tokens, USD per 1M output tokens),
    None when unknown. A `Price` with a cached-input rate prices each scenario's
    `cacheable_input_tokens` at that rate: the figure a provider with automatic prefix caching
    (OpenAI, vLLM, the embedded llama.cpp server) can reach, since every call sends the system
    prompt first, then the excerpts, then the claim. It is an upper bound of the saving:
    providers cache only what they still hold (OpenAI: prompts of 1,024 tokens or more).
    """
    index = sentences or SentenceIndex(dag)
    prompts = _Prompts()
    extraction = StepEstimate()
    if claims is None:
        term_sents = index.sentences(dag.terminal)
        if extraction_mode == "per-sentence":
            n = len(term_sents) * EXTRACTION_CALLS_PER_SENTENCE
            text_tokens = estimate_tokens(dag.node(dag.terminal).text)
            # Each extraction prompt carries the sentence with a window of context (about 1/3 of
            # a short output; capped at the whole output) plus ~300 tokens of instructions.
            per_call = 300 + min(text_tokens, 3 * max(1, text_tokens // max(1, len(term_sents))))
            extraction = StepEstimate(n, n * per_call, n * OUTPUT_TOKENS[EXTRACTION])
        else:
            extraction = _batched_extraction(term_sents)
        claims = [Claim(f"s{i}", s, (i,)) for i, s in enumerate(term_sents)]
    traversals = _traversals(dag, index, config, prompts)
    per = tuple(estimate_claim(dag, index, c, config, prompts, traversals) for c in claims)
    extra = Scenario({EXTRACTION: extraction}) if extraction.calls else Scenario()

    m = config.claims_per_prompt if config.samples == 1 else 1

    def total(pick: str) -> Scenario:
        out = Scenario()
        for ce in per:
            out = out + getattr(ce, pick)
        # The upper bound stays the one-claim form's: a claim that falls out of step with its
        # peers (a longer decomposition, a different trail) is asked alone, never in more calls.
        if m > 1 and pick != "upper":
            counts = [getattr(ce, pick).steps[DECOMPOSITION].calls for ce in per]
            out = _shared_scenario(
                out,
                traversals.widening[:1] if pick == "lower" else traversals.widening,
                claims,
                counts,
                m,
                prompts,
                verdicts=pick != "lower",
            )
        return extra + out

    def shared(pick: str) -> int:
        # Claim-independent evidence tokens of every claim after the first: the claims read
        # the same batches under the estimator's assumptions, so those prefixes were sent.
        ev = [getattr(ce, pick).steps.get(EVIDENCE, StepEstimate()) for ce in per]
        deltas = [prompts.claim_delta(c.text) for c in claims]
        own = [e.input_tokens - e.calls * d for e, d in zip(ev, deltas, strict=True)]
        return sum(max(0, o) for o in own[1:])

    k = config.samples
    lower, est, upper = (
        _with_cacheable(total(pick), prompts, shared(pick), k)
        for pick in ("lower", "estimate", "upper")
    )
    the_price = price if isinstance(price, Price) or price is None else Price(price[0], price[1])

    def dollars(s: Scenario) -> float | None:
        if the_price is None:
            return None
        return the_price.dollars(s.input_tokens, s.output_tokens, s.cacheable_input_tokens)

    return RunEstimate(
        per, extraction, lower, est, upper, dollars(lower), dollars(est), dollars(upper)
    )
