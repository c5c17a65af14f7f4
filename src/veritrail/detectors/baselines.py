"""The methods `veritrail eval` compares: VeriTrail, its oracle, and the paper's baselines.

Every method turns one item (a DAG and its claims) into one `Prediction` per claim. All
LM-based methods end in the same verdict step (`verdict.LMVerdictGenerator` through
`verdict.judge_with_samples`), so differences come from what evidence reaches it:

* ``veritrail`` — the loop (`loop.verify_claims`) with the LM steps, at a given q;
* ``oracle`` — the loop with steps answered from the gold labels and gold evidence (an upper
  bound for the plumbing: evidence recall must be 1.0);
* ``rag`` — embed the root nodes and the claim, keep the top-k roots, one verdict call;
* ``direct`` — all roots in one verdict call (a seeded random subset that fits the token budget
  when they do not);
* ``g2l`` — G2LDetect (`veritrail.detectors.g2l`) against the root nodes;
* ``nli`` — the NLI chunk baseline (AlignScore / MiniCheck style, no LM): every root node cut
  into chunks of about ``chunk`` estimated tokens at sentence boundaries, each chunk scored
  against the claim by a local sequence-classification model (`veritrail.detectors.nli`),
  P(supported) = the maximum over chunks, Fully Supported at or above ``threshold``. Options:
  ``model=PATH`` (required), ``chunk=350``, ``threshold=0.5``, ``batch=8``. Its evidence is the
  sentences of the best chunk; it makes no LM calls.

New kinds are added with `register_method`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..dag import Dag
from ..eval.datasets import EvalItem, GoldClaim, SentenceKey, claim_key
from ..lm.model import Model, claim_scope
from ..method.config import VerifyConfig
from ..method.segment import SentenceIndex
from ..method.steps import Steps, VerdictInput
from ..method.tokens import estimate_tokens
from ..records import Claim, ClaimResult, ErrorStageStatus, StepCost, Verdict
from .embeddings import Embedder, top_k


@dataclass(frozen=True, slots=True)
class Prediction:
    """One method's answer for one claim, with what the metrics need."""

    method: str
    claim_key: str
    verdict: Verdict | None
    score: float | None = None
    evidence: frozenset[SentenceKey] | None = None
    """Root sentences the method used as evidence; None when the method does not select any."""
    lm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    nodes_read: int = 0
    nodes_total: int = 0
    error_stages: tuple[int, ...] = ()
    error_stage_status: ErrorStageStatus | None = None
    termination: str | None = None
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def nodes_read_share(self) -> float:
        """Share of the DAG's nodes the method read for this claim."""
        return self.nodes_read / self.nodes_total if self.nodes_total else 0.0


@dataclass(slots=True)
class ItemContext:
    """What a method gets for one item: the DAG, its sentence cache and the labelled claims."""

    item: EvalItem
    dag: Dag
    sentences: SentenceIndex
    claims: Sequence[GoldClaim]

    def key(self, claim: GoldClaim) -> str:
        """The dataset-wide key of a claim of this item."""
        return claim_key(self.item.id, claim.id)

    def roots(self) -> list[str]:
        """Root node ids in DAG order."""
        return [n.id for n in self.dag if not n.sources]

    def root_keys(self, node_ids: Sequence[str]) -> frozenset[SentenceKey]:
        """Every sentence of the given root nodes."""
        return frozenset(
            (nid, i) for nid in node_ids for i in range(len(self.sentences.sentences(nid)))
        )


class Method(Protocol):
    """A detector under evaluation."""

    name: str
    """The row label in tables, e.g. ``VeriTrail q=3`` or ``RAG k=15``."""

    async def predict(self, ctx: ItemContext) -> list[Prediction]:
        """One prediction per claim of `ctx`, in order."""
        ...


def _cost(per_step: dict[str, StepCost]) -> StepCost:
    out = StepCost()
    for c in per_step.values():
        out = out + c
    return out


# -- VeriTrail ------------------------------------------------------------------------------------


def prediction_from_result(method: str, key: str, dag: Dag, r: ClaimResult) -> Prediction:
    """Turn a loop result into a prediction (evidence = root sentences anywhere in the trail)."""
    ev = frozenset(
        (s.node_id, s.sentence_index)
        for it in r.iterations
        for s in it.evidence
        if s.node_id in dag and dag.is_root(s.node_id)
    )
    return Prediction(
        method=method,
        claim_key=key,
        verdict=r.verdict,
        score=r.score,
        evidence=ev,
        lm_calls=r.cost.lm_calls,
        input_tokens=r.cost.input_tokens,
        output_tokens=r.cost.output_tokens,
        dollars=r.cost.dollars,
        nodes_read=r.cost.nodes_read,
        nodes_total=len(dag),
        error_stages=r.error_stages,
        error_stage_status=r.error_stage_status,
        termination=r.termination.value,
        error=r.error,
        detail={"iterations": len(r.iterations)},
    )


class VeriTrailMethod:
    """The VeriTrail loop with steps built per item (LM steps, or the gold oracle)."""

    def __init__(
        self,
        name: str,
        steps: Callable[[ItemContext], Steps],
        config: VerifyConfig,
        *,
        model: Model | None = None,
        max_parallel_claims: int | None = 4,
    ) -> None:
        self.name = name
        self._steps = steps
        self.config = config
        self.model = model
        self.max_parallel_claims = max_parallel_claims

    async def predict(self, ctx: ItemContext) -> list[Prediction]:
        from ..method.loop import verify_claims

        # Claim ids carry the method name so that one model's usage ledger keeps methods apart.
        claims = [
            Claim(f"{self.name}::{ctx.key(c)}", c.text, c.sentence_indices) for c in ctx.claims
        ]
        results = await verify_claims(
            ctx.dag,
            claims,
            self._steps(ctx),
            self.config,
            sentences=ctx.sentences,
            max_parallel_claims=self.max_parallel_claims,
            model=self.model,
        )
        return [
            prediction_from_result(self.name, ctx.key(c), ctx.dag, r)
            for c, r in zip(ctx.claims, results, strict=True)
        ]


def gold_oracle_steps(ctx: ItemContext) -> Steps:
    """Oracle steps from the gold data: select the first gold set, answer the gold label.

    Claims without gold evidence get no evidence (so the loop ends Not Fully Supported without a
    verdict call) — the oracle only knows what the labels say.
    """
    from ..method.oracle import Oracle

    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in ctx.claims:
        if c.text in seen:
            continue  # the oracle is keyed by text; a repeated claim gets the first entry
        seen.add(c.text)
        evidence: dict[str, list[int]] = {}
        if c.gold_evidence:
            for node, s in sorted(c.gold_evidence[0]):
                evidence.setdefault(node, []).append(s)
        entries.append({"claim": c.text, "evidence": evidence, "verdicts": [c.label.value]})
    return Oracle.from_dict({"claims": entries}).steps()


# -- single-verdict baselines ---------------------------------------------------------------------


class _VerdictBaseline:
    """Shared part of RAG and direct verification: choose roots, then one (sampled) verdict."""

    kind = "baseline"

    def __init__(self, name: str, model: Model, *, samples: int = 1, threshold: int = 1) -> None:
        self.name = name
        self.model = model
        self.config = VerifyConfig(samples=samples, threshold=threshold)

    def choose(self, ctx: ItemContext, claim: GoldClaim) -> tuple[list[str], dict[str, Any]]:
        """Root node ids to show the verdict step, and details for the record."""
        raise NotImplementedError

    async def predict(self, ctx: ItemContext) -> list[Prediction]:
        import asyncio

        return list(await asyncio.gather(*(self._one(ctx, c) for c in ctx.claims)))

    async def _one(self, ctx: ItemContext, claim: GoldClaim) -> Prediction:
        from ..method.verdict import LMVerdictGenerator, judge_with_samples

        key = ctx.key(claim)
        scope = f"{self.name}::{key}"
        chosen, detail = self.choose(ctx, claim)
        inputs = [VerdictInput((nid,), True, ctx.dag.node(nid).text) for nid in chosen]
        verdict: Verdict | None = None
        score: float | None = None
        error: str | None = None
        with claim_scope(scope):
            if not inputs:
                verdict = (
                    Verdict.NOT_FULLY_SUPPORTED
                )  # nothing to read: SPEC §4.3's no-evidence rule
            else:
                try:
                    outcome, score = await judge_with_samples(
                        LMVerdictGenerator(self.model),
                        claim.as_claim(ctx.item.id),
                        (),
                        inputs,
                        self.config,
                    )
                    verdict, error = outcome.verdict, outcome.error
                except Exception as exc:  # noqa: BLE001 - one claim's failure is recorded, not raised
                    error = f"{type(exc).__name__}: {exc}"
        cost = _cost(self.model.usage.for_claim(scope))
        return Prediction(
            method=self.name,
            claim_key=key,
            verdict=verdict if error is None else None,
            score=score if error is None else None,
            evidence=ctx.root_keys(chosen),
            lm_calls=cost.lm_calls,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens,
            dollars=cost.dollars,
            nodes_read=len(chosen),
            nodes_total=len(ctx.dag),
            error=error,
            detail=detail,
        )


class RagMethod(_VerdictBaseline):
    """RAG: the `k` root nodes most similar to the claim (cosine of embeddings), one verdict.

    Root embeddings are computed once per item and shared by its claims; with a DAG file shared
    by several items (DiverseSumm+), once per DAG.
    """

    kind = "rag"

    def __init__(
        self, name: str, model: Model, embedder: Embedder, *, k: int = 15, **kw: Any
    ) -> None:
        super().__init__(name, model, **kw)
        self.embedder = embedder
        self.k = k
        # Keyed by DAG identity; the entry holds the DAG itself so its id cannot be reused.
        self._cache: dict[int, tuple[Dag, list[str], Any]] = {}

    def _root_matrix(self, ctx: ItemContext) -> tuple[list[str], Any]:
        got = self._cache.get(id(ctx.dag))
        if got is None or got[0] is not ctx.dag:
            roots = ctx.roots()
            got = (ctx.dag, roots, self.embedder.embed([ctx.dag.node(r).text for r in roots]))
            if len(self._cache) >= 8:  # a few items run concurrently; older ones are done
                self._cache.pop(next(iter(self._cache)))
            self._cache[id(ctx.dag)] = got
        return got[1], got[2]

    def choose(self, ctx: ItemContext, claim: GoldClaim) -> tuple[list[str], dict[str, Any]]:
        roots, matrix = self._root_matrix(ctx)
        q = self.embedder.embed([claim.text])[0]
        picked = [roots[i] for i in top_k(q, matrix, self.k)]
        return picked, {"retrieved": picked, "embedder": self.embedder.name}


class DirectMethod(_VerdictBaseline):
    """Direct long-context verification: every root in one verdict prompt.

    When the roots exceed `token_budget` (estimated tokens), they are shuffled with a seed derived
    from `seed` and the claim key, and the longest prefix that fits is kept (the paper did this
    per claim for the article set that did not fit); the kept roots are shown in DAG order.
    """

    kind = "direct"

    def __init__(
        self, name: str, model: Model, *, token_budget: int | None = None, seed: int = 0, **kw: Any
    ) -> None:
        super().__init__(name, model, **kw)
        self.token_budget = token_budget
        self.seed = seed

    def choose(self, ctx: ItemContext, claim: GoldClaim) -> tuple[list[str], dict[str, Any]]:
        roots = ctx.roots()
        sizes = {r: estimate_tokens(ctx.dag.node(r).text) for r in roots}
        if self.token_budget is None or sum(sizes.values()) <= self.token_budget:
            return roots, {"subset": False}
        digest = hashlib.sha256(f"{self.seed}:{ctx.key(claim)}".encode()).digest()
        order = list(roots)
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
        kept: set[str] = set()
        used = 0
        for r in order:
            if used + sizes[r] > self.token_budget:
                break
            kept.add(r)
            used += sizes[r]
        return [r for r in roots if r in kept], {
            "subset": True,
            "kept": len(kept),
            "of": len(roots),
        }


class G2LMethod:
    """G2LDetect (another detector of this package) against the root nodes, per claim."""

    kind = "g2l"

    def __init__(self, name: str, model: Model) -> None:
        self.name = name
        self.model = model

    async def predict(self, ctx: ItemContext) -> list[Prediction]:
        import asyncio

        from .g2l import g2l_claim

        async def one(c: GoldClaim) -> Prediction:
            key = ctx.key(c)
            scope = f"{self.name}::{key}"
            error: str | None = None
            verdict: Verdict | None = None
            score: float | None = None
            with claim_scope(scope):
                try:
                    out = await g2l_claim(self.model, c.as_claim(ctx.item.id), ctx.dag)
                    verdict, score = out.verdict, out.score
                except Exception as exc:  # noqa: BLE001 - recorded per claim
                    error = f"{type(exc).__name__}: {exc}"
            cost = _cost(self.model.usage.for_claim(scope))
            roots = ctx.roots()
            return Prediction(
                self.name,
                key,
                verdict,
                score,
                None,
                cost.lm_calls,
                cost.input_tokens,
                cost.output_tokens,
                cost.dollars,
                len(roots),
                len(ctx.dag),
                error=error,
            )

        return list(await asyncio.gather(*(one(c) for c in ctx.claims)))


class NLIChunkMethod:
    """The NLI chunk baseline (see the module docstring): max P(supported) over root chunks."""

    kind = "nli"

    def __init__(
        self, name: str, model: Any, *, chunk_tokens: int = 350, threshold: float = 0.5
    ) -> None:
        self.name = name
        self.model = model  # a `veritrail.detectors.nli.NLIModel`
        self.chunk_tokens = chunk_tokens
        self.threshold = threshold
        # Chunks per DAG (several items may share one DAG file); the entry keeps the DAG alive.
        self._cache: dict[int, tuple[Dag, list[tuple[str, list[int]]], list[str]]] = {}

    def _chunks(self, ctx: ItemContext) -> tuple[list[tuple[str, list[int]]], list[str]]:
        from .nli import chunk_sentences

        got = self._cache.get(id(ctx.dag))
        if got is None or got[0] is not ctx.dag:
            keys: list[tuple[str, list[int]]] = []
            texts: list[str] = []
            for nid in ctx.roots():
                sents = ctx.sentences.sentences(nid)
                for group in chunk_sentences(sents, self.chunk_tokens):
                    keys.append((nid, group))
                    texts.append(" ".join(sents[i] for i in group))
            if len(self._cache) >= 8:
                self._cache.pop(next(iter(self._cache)))
            got = self._cache[id(ctx.dag)] = (ctx.dag, keys, texts)
        return got[1], got[2]

    async def predict(self, ctx: ItemContext) -> list[Prediction]:
        import asyncio

        from .nli import nli_chunk_scores

        keys, texts = self._chunks(ctx)
        out: list[Prediction] = []
        for c in ctx.claims:  # one claim at a time: the model is serialised anyway
            key = ctx.key(c)
            verdict: Verdict | None = None
            score: float | None = None
            evidence: frozenset[SentenceKey] = frozenset()
            error: str | None = None
            detail: dict[str, Any] = {"chunks": len(texts)}
            if not texts:
                verdict, score = Verdict.NOT_FULLY_SUPPORTED, 0.0
            else:
                try:
                    scores = await asyncio.to_thread(nli_chunk_scores, self.model, texts, c.text)
                    best = max(range(len(scores)), key=lambda i: scores[i][0])
                    score = scores[best][0]
                    verdict = (
                        Verdict.FULLY_SUPPORTED
                        if score >= self.threshold
                        else Verdict.NOT_FULLY_SUPPORTED
                    )
                    nid, group = keys[best]
                    evidence = frozenset((nid, i) for i in group)
                    detail["best_chunk"] = {"node": nid, "sentences": group}
                except Exception as exc:  # noqa: BLE001 - one claim's failure is recorded
                    error = f"{type(exc).__name__}: {exc}"
            out.append(
                Prediction(
                    method=self.name,
                    claim_key=key,
                    verdict=verdict,
                    score=score,
                    evidence=evidence if error is None else None,
                    nodes_read=len(ctx.roots()),
                    nodes_total=len(ctx.dag),
                    error=error,
                    detail=detail,
                )
            )
        return out


# -- method specs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A method as named on the command line: ``kind`` plus ``key=value`` options.

    Examples: ``veritrail:q=1``, ``rag:k=15``, ``direct:budget=100000``, ``oracle``, ``g2l``,
    ``nli:model=/models/deberta-mnli,chunk=350``.
    """

    kind: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> MethodSpec:
        """Parse ``kind[:key=value[,key=value...]]``."""
        kind, _, rest = text.strip().partition(":")
        opts: list[tuple[str, str]] = []
        for part in filter(None, (p.strip() for p in rest.split(","))):
            k, eq, v = part.partition("=")
            if not eq or not k:
                raise ValueError(f"method option {part!r} in {text!r} is not key=value")
            opts.append((k.strip(), v.strip()))
        return cls(kind.strip().lower(), tuple(opts))

    def get(self, key: str, default: str | None = None) -> str | None:
        """An option's value."""
        return dict(self.options).get(key, default)


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What method factories may use: the model (None for oracle-only runs) and shared settings."""

    model: Model | None
    base_config: VerifyConfig
    samples: int = 1
    threshold: int = 1
    embedder: Callable[[str], Embedder] | None = None
    default_embedder: str = "minilm-onnx"
    token_budget: int | None = None
    seed: int = 0


MethodFactory = Callable[[MethodSpec, BuildContext], Method]
_FACTORIES: dict[str, MethodFactory] = {}


def register_method(kind: str, factory: MethodFactory) -> None:
    """Make `kind` usable as ``--method kind:...`` (later registrations replace earlier ones)."""
    _FACTORIES[kind] = factory


def _need_model(spec: MethodSpec, ctx: BuildContext) -> Model:
    if ctx.model is None:
        raise ValueError(f"method {spec.kind!r} needs a model (--model)")
    return ctx.model


def _int(spec: MethodSpec, key: str, default: int | None) -> int | None:
    v = spec.get(key)
    return default if v is None else int(v)


def _veritrail(spec: MethodSpec, ctx: BuildContext) -> Method:
    from dataclasses import replace

    from ..method.loop import lm_steps

    model = _need_model(spec, ctx)
    q = _int(spec, "q", ctx.base_config.q) or ctx.base_config.q
    cfg = replace(ctx.base_config, q=q, samples=ctx.samples, threshold=ctx.threshold)
    ev = spec.get("evidence")
    if ev is not None:
        cfg = replace(cfg, evidence_sentences_root=int(ev), evidence_sentences_nonroot=int(ev))
    suffix = f", {ev} sent./prompt" if ev else ""
    steps = lm_steps(model)
    return VeriTrailMethod(f"VeriTrail q={q}{suffix}", lambda _c: steps, cfg, model=model)


def _oracle(spec: MethodSpec, ctx: BuildContext) -> Method:
    from dataclasses import replace

    q = _int(spec, "q", ctx.base_config.q) or ctx.base_config.q
    return VeriTrailMethod(
        f"Oracle (gold) q={q}",
        gold_oracle_steps,
        replace(ctx.base_config, q=q, samples=1, threshold=1),
    )


def _rag(spec: MethodSpec, ctx: BuildContext) -> Method:
    from .embeddings import get_embedder

    k = _int(spec, "k", 15) or 15
    emb_name = spec.get("embedder", ctx.default_embedder) or ctx.default_embedder
    embedder = (ctx.embedder or get_embedder)(emb_name)
    label = f"RAG k={k}" + ("" if emb_name == ctx.default_embedder else f" ({embedder.name})")
    return RagMethod(
        label, _need_model(spec, ctx), embedder, k=k, samples=ctx.samples, threshold=ctx.threshold
    )


def _direct(spec: MethodSpec, ctx: BuildContext) -> Method:
    budget = _int(spec, "budget", ctx.token_budget)
    label = "Direct" + (f" (≤{budget} tok)" if budget else "")
    return DirectMethod(
        label,
        _need_model(spec, ctx),
        token_budget=budget,
        seed=_int(spec, "seed", ctx.seed) or 0,
        samples=ctx.samples,
        threshold=ctx.threshold,
    )


def _g2l(spec: MethodSpec, ctx: BuildContext) -> Method:
    return G2LMethod("G2LDetect", _need_model(spec, ctx))


def _nli(spec: MethodSpec, ctx: BuildContext) -> Method:
    from pathlib import Path

    from .nli import NLIModel

    path = spec.get("model")
    if not path:
        raise ValueError("method 'nli' needs model=PATH (a local Hugging Face model directory)")
    chunk = _int(spec, "chunk", 350) or 350
    threshold = float(spec.get("threshold", "0.5") or 0.5)
    batch = _int(spec, "batch", 8) or 8
    model = NLIModel(path, batch_size=batch)  # NLIModelError (a ValueError) names the problem
    label = f"NLI {Path(path).name} chunk={chunk}" + (
        "" if threshold == 0.5 else f" t={threshold:g}"
    )
    return NLIChunkMethod(label, model, chunk_tokens=chunk, threshold=threshold)


for _kind, _factory in (
    ("veritrail", _veritrail),
    ("oracle", _oracle),
    ("rag", _rag),
    ("direct", _direct),
    ("g2l", _g2l),
    ("nli", _nli),
):
    register_method(_kind, _factory)


def build_method(spec: MethodSpec | str, ctx: BuildContext) -> Method:
    """Instantiate a method from its spec."""
    s = MethodSpec.parse(spec) if isinstance(spec, str) else spec
    factory = _FACTORIES.get(s.kind)
    if factory is None:
        raise ValueError(f"unknown method {s.kind!r}; known: {', '.join(sorted(_FACTORIES))}")
    return factory(s, ctx)


def known_methods() -> list[str]:
    """Registered method kinds."""
    return sorted(_FACTORIES)
