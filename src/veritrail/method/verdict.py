"""Verdict generation (docs/method.md#verdict): verdict inputs, the size limit with compression, the LM judge.

Verdict inputs are never bare sentences: a root node with evidence contributes its full text, a
non-root node contributes the evidence summary written during selection. `decide_round` is the
whole verdict step of one round: no evidence (no call), input assembly, compression reruns
(evidence selection over the selected sentences) until the input fits, the largest fitting
subset after that, and the judge (one call, or a vote in soft prediction).
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..dag import Dag
from ..fencing import fence
from ..records import Claim, SelectionIssue, SentenceRef, Step, Summary, Verdict
from .config import VerifyConfig
from .evidence import RoundEvidence, batch_items, select_over
from .keyterms import SourceVocabulary, check_outcome
from .prompting import load_prompt
from .segment import SentenceIndex, split_sentences
from .sharing import (
    CONCISE_MAX_CLAIMS,
    Coalescer,
    claim_entry_schema,
    current_sharing,
    entries_by_claim,
    finish_group,
    honours_overrides,
    render_claims,
)
from .steps import (
    LMStep,
    VerdictGenerator,
    VerdictInput,
    VerdictOutcome,
    text_field,
    unreadable_issues,
)
from .subclaims import claim_parts, format_subclaims
from .tokens import estimate_tokens

if TYPE_CHECKING:
    from ..lm.model import Model
    from .context import RunContext

# The concise reply format's bound on the reasoning (issue 19): a sentence or two, which is what
# the report shows a reader; the verdict itself is not bounded. (400 until session 5.)
CONCISE_REASONING_CHARS = 200


def _verdict_schema(concise: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "reasoning": text_field(CONCISE_REASONING_CHARS if concise else None),
            "verdict": {"type": "string", "enum": [v.value for v in Verdict]},
        },
        "required": ["reasoning", "verdict"],
        "additionalProperties": False,
    }


# One object per format: the model layer remembers per schema object whether strict mode takes it.
_VERDICT_SCHEMAS = {concise: _verdict_schema(concise) for concise in (False, True)}


def _verdict(value: Any) -> tuple[Verdict, str]:
    if not isinstance(value, dict) or "verdict" not in value:
        raise ValueError('expected {"reasoning": ..., "verdict": ...}')
    return Verdict.parse(str(value["verdict"])), str(value.get("reasoning", ""))


def render_evidence(evidence: Sequence[VerdictInput]) -> str:
    """Verdict evidence as labelled, fenced items; node ids are quoted by `fence` (`ids=`)."""
    blocks = []
    for i, item in enumerate(evidence, 1):
        kind = "source document" if item.is_root else "evidence summary"
        nodes = "nodes" if len(item.node_ids) > 1 else "node"
        blocks.append(fence(item.text, f"item {i} ({kind}) {nodes}", ids=item.node_ids))
    return "\n\n".join(blocks)


def _shared_verdict_schema(n_claims: int, concise: bool) -> dict[str, Any]:
    one = _VERDICT_SCHEMAS[concise]
    return claim_entry_schema(n_claims, one["properties"], one["required"])


# One object per (claims, format), as for `_VERDICT_SCHEMAS`; built when first asked for.
_SHARED_VERDICT_SCHEMAS: dict[tuple[int, bool], dict[str, Any]] = {}


def shared_verdict_schema(n_claims: int, concise: bool) -> dict[str, Any]:
    """The reply schema of a shared verdict prompt (docs/method.md#shared-prompts)."""
    key = (n_claims, concise)
    got = _SHARED_VERDICT_SCHEMAS.get(key)
    if got is None:
        got = _SHARED_VERDICT_SCHEMAS[key] = _shared_verdict_schema(n_claims, concise)
    return got


@dataclass(frozen=True, slots=True)
class _VerdictAsk:
    claim: Claim
    subclaims: Sequence[str]
    items: tuple[VerdictInput, ...]
    """The claim's verdict evidence."""
    tokens: int
    """Estimated tokens of the claim and its sub-claims."""


_UNION = "verdict"
"""The one queue of shared verdicts: claims with different evidence share a prompt too (the union
of their items, each claim judged on its own items)."""


def union_items(asks: Sequence[_VerdictAsk]) -> tuple[list[VerdictInput], list[list[int]]]:
    """The distinct evidence items of `asks` in order of first appearance, and for each ask the
    1-based numbers of its own items among them."""
    order: dict[VerdictInput, int] = {}
    own: list[list[int]] = []
    for ask in asks:
        own.append([order.setdefault(item, len(order) + 1) for item in ask.items])
    return list(order), own


def _added_tokens(ask: _VerdictAsk, group: Sequence[_VerdictAsk]) -> int:
    """What `ask` adds to a shared verdict prompt holding `group`: its claim, and its evidence
    items the group does not carry yet."""
    held = {item for other in group for item in other.items}
    return ask.tokens + sum(estimate_tokens(i.text) for i in ask.items if i not in held)


def render_shared_claims(asks: Sequence[_VerdictAsk], own: Sequence[Sequence[int]]) -> str:
    """The claims of a shared verdict prompt, each fenced with its sub-claims, then the numbers
    of the evidence items it is judged on."""
    return render_claims(
        [claim_parts(a.claim.text, a.subclaims) for a in asks], own, "Evidence items"
    )


class LMVerdictGenerator(LMStep):
    """The default judge: one model call over the assembled evidence for one claim or, when the
    run shares prompts (`sharing`), for several claims at once: the union of their evidence items
    once, then each claim with the numbers of its own items."""

    def __init__(
        self, model: Model, temperature: float = 0.0, sample_temperature: float = 0.2
    ) -> None:
        super().__init__(model, temperature, sample_temperature)
        self.shared_prompts: Coalescer[_VerdictAsk, VerdictOutcome] = Coalescer(self._judge_group)

    async def judge(
        self,
        claim: Claim,
        subclaims: Sequence[str],
        evidence: Sequence[VerdictInput],
        *,
        sample: int = 0,
    ) -> VerdictOutcome:
        """Ask the model for a verdict; an unreadable reply comes back with `error` set."""
        tokens = estimate_tokens(claim.text) + sum(estimate_tokens(s) for s in subclaims)
        ask = _VerdictAsk(claim, subclaims, tuple(evidence), tokens)
        sharing = current_sharing()
        # Soft prediction's samples stay per claim: each is a call of its own by design.
        if sample != 0 or not sharing.on or not honours_overrides("verdict", "verdict_shared"):
            return await self._judge_alone(ask, sample)
        if self.concise:
            sharing = replace(sharing, max_claims=min(sharing.max_claims, CONCISE_MAX_CLAIMS))
        # The group's bound counts the claims and the union of their evidence.
        limits = replace(sharing, max_tokens=sharing.max_tokens + sharing.evidence_tokens)
        return await self.shared_prompts.submit(
            _UNION, ask, functools.partial(_added_tokens, ask), limits, exact=ask.items
        )

    async def _judge_alone(self, ask: _VerdictAsk, sample: int = 0) -> VerdictOutcome:
        """The paper's prompt: one claim over its evidence."""
        messages = load_prompt("verdict").render(
            evidence=render_evidence(ask.items),
            claim=fence(ask.claim.text, "claim"),
            subclaims=fence(format_subclaims(ask.subclaims), "sub-claims"),
        )
        res = await self.model.generate_json(
            messages,
            schema=_VERDICT_SCHEMAS[self.concise],
            step=Step.VERDICT,
            validate=_verdict,
            config=self.sample_config(sample),
        )
        if res.value is None:
            return VerdictOutcome(
                None,
                "",
                error=res.error or "unreadable reply",
                raw=res.raw,
                unreadable=res.unreadable,
            )
        verdict, reasoning = res.value
        return VerdictOutcome(verdict, reasoning, raw=res.raw, unreadable=res.unreadable)

    async def _judge_group(self, asks: Sequence[_VerdictAsk]) -> list[VerdictOutcome]:
        """One prompt for the claims of `asks`: the union of their evidence items once, then the
        claims, each naming its own items. A claim the reply leaves out, or whose entry cannot be
        read, is judged alone (`_judge_alone`)."""
        if len(asks) == 1:
            return [await self._judge_alone(asks[0])]
        n = len(asks)
        items, own = union_items(asks)
        messages = load_prompt("verdict_shared").render(
            evidence=render_evidence(items), claims=render_shared_claims(asks, own)
        )
        res = await self.model.generate_json(
            messages,
            schema=shared_verdict_schema(n, self.concise),
            step=Step.VERDICT,
            validate=functools.partial(entries_by_claim, n=n),
            config=self.sample_config(0),
        )

        def read(_k: int, entry: Any) -> VerdictOutcome:
            verdict, reasoning = _verdict(entry)
            return VerdictOutcome(verdict, reasoning, raw=res.raw, unreadable=res.unreadable)

        return await finish_group(
            res.value, n, read, lambda k: self._judge_alone(asks[k]), res.unreadable
        )


def build_inputs(
    dag: Dag,
    sentences: SentenceIndex,
    evidence: Sequence[SentenceRef],
    summaries: Sequence[Summary],
    carried_roots: Sequence[str],
) -> list[VerdictInput]:
    """Roots with evidence (this round's and carried) in full; non-root evidence as summaries."""
    roots = list(
        dict.fromkeys([*(r.node_id for r in evidence if dag.is_root(r.node_id)), *carried_roots])
    )
    nonroot_nodes = {r.node_id for r in evidence if not dag.is_root(r.node_id)}
    items: list[VerdictInput] = []
    covered: set[str] = set()
    for s in summaries:
        ids = tuple(n for n in s.node_ids if n in nonroot_nodes)
        if ids and s.text.strip():
            items.append(VerdictInput(ids, False, s.text))
            covered.update(ids)
    # A non-root node with evidence but no summary (a selector that wrote none) still counts:
    # fall back to its selected sentences so the verdict sees what was found. (Grouped in one
    # pass: a wide round can hold thousands of such nodes.)
    bare = nonroot_nodes - covered
    if bare:
        texts: dict[str, list[str]] = {}
        for r in evidence:
            if r.node_id in bare:
                texts.setdefault(r.node_id, []).append(r.text)
        items.extend(
            VerdictInput((nid,), False, " ".join(texts[nid]), len(texts[nid]))
            for nid in sorted(bare)
        )
    items.extend(VerdictInput((r,), True, dag.node(r).text) for r in roots)
    return items


def _item_size(item: VerdictInput, sentences: SentenceIndex) -> tuple[int, int, bool]:
    """(sentences, estimated tokens, is a root) of one verdict item."""
    if item.is_root:
        n_sent = len(sentences.sentences(item.node_ids[0]))
    elif item.sentence_count is not None:  # selected sentences, joined: no need to split again
        n_sent = item.sentence_count or 1
    else:
        n_sent = len(split_sentences(item.text)) or 1
    return n_sent, estimate_tokens(item.text), item.is_root


def _within(n_sent: int, n_tok: int, has_root: bool, config: VerifyConfig) -> bool:
    if config.verdict_tokens is not None and n_tok > config.verdict_tokens:
        return False
    return has_root or config.verdict_sentences is None or n_sent <= config.verdict_sentences


def input_size(items: Sequence[VerdictInput], sentences: SentenceIndex) -> tuple[int, int, bool]:
    """(sentences, estimated tokens, includes a root) of a verdict input."""
    sizes = [_item_size(it, sentences) for it in items]
    return sum(s for s, _, _ in sizes), sum(t for _, t, _ in sizes), any(r for _, _, r in sizes)


def fits(items: Sequence[VerdictInput], sentences: SentenceIndex, config: VerifyConfig) -> bool:
    """Whether the verdict input respects the configured limits (docs/method.md#verdict)."""
    return _within(*input_size(items, sentences), config)


def largest_fitting_subset(
    items: Sequence[VerdictInput], sentences: SentenceIndex, config: VerifyConfig
) -> list[VerdictInput]:
    """The largest number of items that fits, taking the smallest first; original order kept.

    Item sizes are computed once and added up (summaries are segmented once, not per trial).
    """
    sizes = [_item_size(it, sentences) for it in items]
    order = sorted(range(len(items)), key=lambda i: (sizes[i][1], i))
    chosen: list[int] = []
    n_sent, n_tok, has_root = 0, 0, False
    for i in order:
        s, t, r = sizes[i]
        if _within(n_sent + s, n_tok + t, has_root or r, config):
            chosen.append(i)
            n_sent, n_tok, has_root = n_sent + s, n_tok + t, has_root or r
    return [items[j] for j in sorted(chosen)]


async def judge_with_samples(
    judge: VerdictGenerator,
    claim: Claim,
    subclaims: Sequence[str],
    inputs: Sequence[VerdictInput],
    config: VerifyConfig,
    *,
    sources: SourceVocabulary | None = None,
) -> tuple[VerdictOutcome, float | None]:
    """One verdict (hard mode) or a vote over `config.samples` verdicts (soft mode, docs/method.md#soft-prediction).

    Soft mode: the label given by at least `threshold` samples wins (the most frequent if several);
    no winner or a tie between winners gives Inconclusive. Returns the share of Fully Supported
    samples as the score. With `sources` (the key-term check is on), a Fully Supported result on a
    claim naming terms absent from them becomes Not Fully Supported (`keyterms.check_outcome`).
    """
    outcome, score = await _vote(judge, claim, subclaims, inputs, config)
    if sources is not None and outcome.error is None:
        return check_outcome(outcome, score, claim.text, sources)
    return outcome, score


async def _vote(
    judge: VerdictGenerator,
    claim: Claim,
    subclaims: Sequence[str],
    inputs: Sequence[VerdictInput],
    config: VerifyConfig,
) -> tuple[VerdictOutcome, float | None]:
    if config.samples == 1:  # hard prediction: one call, awaited directly (no task, no gather)
        outs = [await judge.judge(claim, subclaims, inputs, sample=0)]
    else:
        outs = list(
            await asyncio.gather(
                *(judge.judge(claim, subclaims, inputs, sample=k) for k in range(config.samples))
            )
        )
    # The unreadable replies of every sample, in sample order, go with whatever is returned.
    unreadable = tuple(u for o in outs for u in o.unreadable)
    for o in outs:
        if o.error is not None:
            return replace(o, unreadable=unreadable), None
    if config.samples == 1:
        return outs[0], None
    counts = Counter(o.verdict for o in outs if o.verdict is not None)
    score = counts.get(Verdict.FULLY_SUPPORTED, 0) / config.samples
    ranked = [(v, n) for v, n in counts.most_common() if n >= config.threshold]
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        winner = Verdict.INCONCLUSIVE
    else:
        winner = ranked[0][0]
    reasoning = next(
        (o.reasoning for o in outs if o.verdict == winner), "no label reached the vote threshold"
    )
    votes = ", ".join(f"{v.value}: {n}" for v, n in counts.most_common())
    return VerdictOutcome(
        winner,
        f"{reasoning}\n[votes over {config.samples} samples: {votes}]",
        unreadable=unreadable,
    ), score


@dataclass(frozen=True, slots=True)
class RoundVerdict:
    """The verdict step of one round: the outcome, and the evidence it was given (compression
    reruns replace the round's evidence and summaries, docs/method.md#verdict)."""

    outcome: VerdictOutcome
    called: bool
    """False when no judge was asked (no evidence, or none fits the size limit)."""
    score: float | None
    """Soft prediction: the share of Fully Supported samples when the judge was asked."""
    evidence: tuple[SentenceRef, ...]
    summaries: tuple[Summary, ...]
    nodes_with_evidence: tuple[str, ...]
    reruns: int = 0
    truncated: bool = False
    """The judge saw only the largest fitting subset of the inputs."""


async def decide_round(
    ctx: RunContext,
    claim: Claim,
    subclaims: Sequence[str],
    found: RoundEvidence,
    carried: Sequence[str],
    issues: list[SelectionIssue],
) -> RoundVerdict:
    """The verdict of one round over the evidence `found` and the `carried` roots (docs/method.md#verdict).

    Issues met on the way (the compression reruns' selection issues, unreadable verdict replies)
    are appended to `issues` as they come. A compression rerun whose reply cannot be read raises
    `evidence.SelectionFailed` (its issues attached, not appended); an unreadable verdict comes
    back as an outcome with `verdict` None and `error` set.
    """
    evidence, summaries, with_ev = found.evidence, found.summaries, found.nodes_with_evidence
    if not evidence and not carried:
        no_evidence = VerdictOutcome(
            Verdict.NOT_FULLY_SUPPORTED, "No evidence was found in the nodes checked."
        )
        return RoundVerdict(no_evidence, False, None, evidence, summaries, with_ev)
    dag, sentences, config = ctx.dag, ctx.sentences, ctx.config
    inputs = build_inputs(dag, sentences, evidence, summaries, carried)
    fit = fits(inputs, sentences, config)  # measured once per input (segments summaries)
    reruns = 0
    # Compression: re-run selection on the selected evidence until it fits.
    while not fit and reruns < config.max_compression_reruns and evidence:
        reruns += 1
        by_node: dict[str, tuple[list[int], list[str]]] = {}
        for r in evidence:
            idx, txt = by_node.setdefault(r.node_id, ([], []))
            idx.append(r.sentence_index)
            txt.append(r.text)
        items = [(n, idx, txt) for n, (idx, txt) in by_node.items()]
        comp = await select_over(
            dag,
            batch_items(
                [it for it in items if dag.is_root(it[0])],
                [it for it in items if not dag.is_root(it[0])],
                config,
            ),
            claim,
            subclaims,
            ctx.steps.selector,
            config,
        )
        issues.extend(comp.issues)
        if len(comp.evidence) >= len(evidence) and comp.nodes_with_evidence == with_ev:
            evidence, summaries = comp.evidence, comp.summaries
            inputs = build_inputs(dag, sentences, evidence, summaries, carried)
            fit = fits(inputs, sentences, config)
            break  # no progress: further reruns would not shrink it
        evidence, summaries, with_ev = comp.evidence, comp.summaries, comp.nodes_with_evidence
        inputs = build_inputs(dag, sentences, evidence, summaries, carried)
        fit = fits(inputs, sentences, config)
    truncated = False
    if not fit:
        inputs = largest_fitting_subset(inputs, sentences, config)
        truncated = True
    if not inputs:
        too_large = VerdictOutcome(
            Verdict.NOT_FULLY_SUPPORTED, "No evidence fits the verdict size limit."
        )
        return RoundVerdict(too_large, False, None, evidence, summaries, with_ev, reruns, truncated)
    outcome, score = await judge_with_samples(
        ctx.steps.judge, claim, subclaims, inputs, config, sources=ctx.term_vocabulary
    )
    issues.extend(unreadable_issues(Step.VERDICT, outcome.unreadable))
    return RoundVerdict(outcome, True, score, evidence, summaries, with_ev, reruns, truncated)
