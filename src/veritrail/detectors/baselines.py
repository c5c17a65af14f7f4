"""The paper's baselines as `Detector`s (`detectors.base`), compared with VeriTrail by `veritrail eval`.

All LM-based baselines end in the same verdict step as VeriTrail (`verdict.LMVerdictGenerator`
through `verdict.judge_with_samples`), so differences come from what evidence reaches it:

* ``rag`` (`RagDetector`) — embed the root nodes and the claim, keep the top-k roots, one
  verdict call;
* ``direct`` (`DirectDetector`) — all roots in one verdict call (a seeded random subset that fits
  the token budget when they do not);
* ``nli`` (`NLIChunkDetector`) — the NLI chunk baseline (AlignScore / MiniCheck style, no LM):
  every root node cut into chunks of about ``chunk`` estimated tokens at sentence boundaries,
  each chunk scored against the claim by a local sequence-classification model
  (`veritrail.detectors.nli`), P(supported) = the maximum over chunks, Fully Supported at or
  above ``threshold``. Options: ``model=PATH`` (required), ``chunk=350``, ``threshold=0.5``,
  ``batch=8``. Its evidence is the sentences of the best chunk; it makes no LM calls.

VeriTrail and its gold oracle are in `detectors.veritrail`, G2LDetect in `detectors.g2l`; method
specs (``rag:k=15``) become detectors in `detectors.registry`. The names this module had before
the `Detector` protocol (`Prediction`, `Method`, `VeriTrailMethod`, `RagMethod`, `build_method`,
…) are still importable from here.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..dag import Dag, PerDag
from ..lm.model import Model, claim_scope
from ..method.config import VerifyConfig
from ..method.keyterms import SourceVocabulary, VocabularyCache
from ..method.keyterms import enabled as keyterms_enabled
from ..method.segment import SentenceIndex
from ..method.steps import VerdictInput
from ..method.tokens import estimate_tokens
from ..records import Claim, Verdict
from .base import (
    Detection,
    Detector,
    claim_cost,
    error_text,
    root_ids,
    root_sentence_keys,
)
from .embeddings import Embedder, top_k
from .g2l import G2LDetector
from .registry import (
    BuildContext,
    MethodFactory,
    MethodSpec,
    build_method,
    known_methods,
    register_method,
)
from .veritrail import OracleDetector, VeriTrailDetector, gold_oracle_steps
from .veritrail import detection_from_result as prediction_from_result

if TYPE_CHECKING:
    from ..eval.datasets import GoldClaim, SentenceKey

_DEFAULT = VerifyConfig()


class _VerdictBaseline:
    """Shared part of RAG and direct verification: choose roots, then one (sampled) verdict."""

    kind = "baseline"

    def __init__(
        self,
        name: str,
        model: Model,
        *,
        samples: int = _DEFAULT.samples,
        threshold: int = _DEFAULT.threshold,
        term_check: bool | None = _DEFAULT.term_check,
    ) -> None:
        self.name = name
        self.model = model
        self.config = VerifyConfig(samples=samples, threshold=threshold, term_check=term_check)
        self._vocabularies = VocabularyCache()

    def choose(self, dag: Dag, claim: Claim) -> tuple[list[str], dict[str, Any]]:
        """Root node ids to show the verdict step, and details for the record."""
        raise NotImplementedError

    def _term_vocabulary(self, dag: Dag) -> SourceVocabulary | None:
        # The same key-term check as VeriTrail's verdict step, under the same rule (on for the
        # embedded models), so a comparison with the same model compares the evidence.
        if keyterms_enabled(self.config.term_check, self.model):
            return self._vocabularies.get(dag)
        return None

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """One verdict call (or `samples` of them) per claim, claims concurrently."""
        idx = sentences if sentences is not None else SentenceIndex(dag)
        return list(await asyncio.gather(*(self._one(dag, idx, c) for c in claims)))

    async def _one(self, dag: Dag, sentences: SentenceIndex, claim: Claim) -> Detection:
        from ..method.verdict import LMVerdictGenerator, judge_with_samples

        scope = f"{self.name}::{claim.id}"
        chosen, detail = self.choose(dag, claim)
        inputs = [VerdictInput((nid,), True, dag.node(nid).text) for nid in chosen]
        verdict: Verdict | None = None
        score: float | None = None
        error: str | None = None
        native: Any = None
        with claim_scope(scope):
            if not inputs:
                verdict = (
                    Verdict.NOT_FULLY_SUPPORTED
                )  # nothing to read: SPEC §4.3's no-evidence rule
            else:
                try:
                    outcome, score = await judge_with_samples(
                        LMVerdictGenerator(self.model),
                        claim,
                        (),
                        inputs,
                        self.config,
                        sources=self._term_vocabulary(dag),
                    )
                    verdict, error, native = outcome.verdict, outcome.error, outcome
                except Exception as exc:  # noqa: BLE001 - one claim's failure is recorded, not raised
                    error, native = error_text(exc), exc
        cost = claim_cost(self.model, scope)
        return Detection(
            method=self.name,
            claim_id=claim.id,
            verdict=verdict if error is None else None,
            score=score if error is None else None,
            evidence=root_sentence_keys(sentences, chosen),
            lm_calls=cost.lm_calls,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens,
            dollars=cost.dollars,
            nodes_read=len(chosen),
            nodes_total=len(dag),
            error=error,
            detail=detail,
            native=native,
        )


class RagDetector(_VerdictBaseline):
    """RAG: the `k` root nodes most similar to the claim (cosine of embeddings), one verdict.

    Root embeddings are computed once per DAG and shared by its claims (and by the items of a
    dataset that share one DAG file, as DiverseSumm+ does).
    """

    kind = "rag"

    def __init__(
        self, name: str, model: Model, embedder: Embedder, *, k: int = 15, **kw: Any
    ) -> None:
        super().__init__(name, model, **kw)
        self.embedder = embedder
        self.k = k
        # A few items run concurrently; older ones are done.
        self._matrices: PerDag[tuple[list[str], Any]] = PerDag()

    def _root_matrix(self, dag: Dag) -> tuple[list[str], Any]:
        def embed(d: Dag) -> tuple[list[str], Any]:
            roots = root_ids(d)
            return roots, self.embedder.embed([d.node(r).text for r in roots])

        return self._matrices.get(dag, embed)

    def choose(self, dag: Dag, claim: Claim) -> tuple[list[str], dict[str, Any]]:
        roots, matrix = self._root_matrix(dag)
        q = self.embedder.embed([claim.text])[0]
        picked = [roots[i] for i in top_k(q, matrix, self.k)]
        return picked, {"retrieved": picked, "embedder": self.embedder.name}


class DirectDetector(_VerdictBaseline):
    """Direct long-context verification: every root in one verdict prompt.

    When the roots exceed `token_budget` (estimated tokens), they are shuffled with a seed derived
    from `seed` and the claim's id, and the longest prefix that fits is kept (the paper did this
    per claim for the article set that did not fit); the kept roots are shown in DAG order.
    """

    kind = "direct"

    def __init__(
        self, name: str, model: Model, *, token_budget: int | None = None, seed: int = 0, **kw: Any
    ) -> None:
        super().__init__(name, model, **kw)
        self.token_budget = token_budget
        self.seed = seed

    def choose(self, dag: Dag, claim: Claim) -> tuple[list[str], dict[str, Any]]:
        roots = root_ids(dag)
        sizes = {r: estimate_tokens(dag.node(r).text) for r in roots}
        if self.token_budget is None or sum(sizes.values()) <= self.token_budget:
            return roots, {"subset": False}
        digest = hashlib.sha256(f"{self.seed}:{claim.id}".encode()).digest()
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


class NLIChunkDetector:
    """The NLI chunk baseline (see the module docstring): max P(supported) over root chunks."""

    kind = "nli"

    def __init__(
        self, name: str, model: Any, *, chunk_tokens: int = 350, threshold: float = 0.5
    ) -> None:
        self.name = name
        self.model = model  # a `veritrail.detectors.nli.NLIModel`
        self.chunk_tokens = chunk_tokens
        self.threshold = threshold
        # Chunks per DAG (several items may share one DAG file).
        self._chunk_cache: PerDag[tuple[list[tuple[str, list[int]]], list[str]]] = PerDag()

    def _chunks(
        self, dag: Dag, sentences: SentenceIndex
    ) -> tuple[list[tuple[str, list[int]]], list[str]]:
        from .nli import chunk_sentences

        def chunk(d: Dag) -> tuple[list[tuple[str, list[int]]], list[str]]:
            keys: list[tuple[str, list[int]]] = []
            texts: list[str] = []
            for nid in root_ids(d):
                sents = sentences.sentences(nid)
                for group in chunk_sentences(sents, self.chunk_tokens):
                    keys.append((nid, group))
                    texts.append(" ".join(sents[i] for i in group))
            return keys, texts

        return self._chunk_cache.get(dag, chunk)

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """Score every claim against every root chunk, one claim at a time."""
        from .nli import nli_chunk_scores

        keys, texts = self._chunks(dag, sentences if sentences is not None else SentenceIndex(dag))
        n_roots = len(root_ids(dag))
        out: list[Detection] = []
        for c in claims:  # one claim at a time: the model is serialised anyway
            verdict: Verdict | None = None
            score: float | None = None
            evidence: frozenset[SentenceKey] = frozenset()
            error: str | None = None
            native: Any = None
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
                    native = scores
                except Exception as exc:  # noqa: BLE001 - one claim's failure is recorded
                    error, native = error_text(exc), exc
            out.append(
                Detection(
                    method=self.name,
                    claim_id=c.id,
                    verdict=verdict,
                    score=score,
                    evidence=evidence if error is None else None,
                    nodes_read=n_roots,
                    nodes_total=len(dag),
                    error=error,
                    detail=detail,
                    native=native,
                )
            )
        return out


# -- the names of before the Detector protocol (kept importable) -----------------------------------

Prediction = Detection
"""The eval's per-claim record is the detectors' `Detection`."""
Method = Detector
"""A method under evaluation is a `Detector`."""
RagMethod = RagDetector
DirectMethod = DirectDetector
NLIChunkMethod = NLIChunkDetector
G2LMethod = G2LDetector
VeriTrailMethod = VeriTrailDetector

__all__ = [
    "BuildContext",
    "DirectDetector",
    "DirectMethod",
    "G2LMethod",
    "Method",
    "MethodFactory",
    "MethodSpec",
    "NLIChunkDetector",
    "NLIChunkMethod",
    "OracleDetector",
    "Prediction",
    "RagDetector",
    "RagMethod",
    "VeriTrailDetector",
    "VeriTrailMethod",
    "build_method",
    "gold_oracle_steps",
    "known_methods",
    "prediction_from_result",
    "register_method",
]
