"""The paper's LM baselines as `Detector`s (`detectors.base`), compared with VeriTrail by `veritrail eval`.

Both end in the same verdict step as VeriTrail (`verdict.LMVerdictGenerator` through
`verdict.judge_with_samples`), so differences come from what evidence reaches it:

* ``rag`` (`RagDetector`) — embed the root nodes and the claim, keep the top-k roots, one
  verdict call;
* ``direct`` (`DirectDetector`) — all roots in one verdict call (a seeded random subset that fits
  the token budget when they do not).

The NLI chunk baseline (``nli``, no LM) is `detectors.nli.NLIChunkDetector`, beside the NLI model
it runs. VeriTrail and its gold oracle are in `detectors.veritrail`, G2LDetect in
`detectors.g2l`; method specs (``rag:k=15``) become detectors in `detectors.registry`, which
imports this module (never the other way round).
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
from ..records import Claim, GoldClaim, Verdict
from .base import (
    Detection,
    claim_cost,
    error_text,
    root_ids,
    root_sentence_keys,
)

if TYPE_CHECKING:  # numpy comes with the eval extra: this module loads on the core install
    from .embeddings import Embedder

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
                )  # nothing to read: the no-evidence rule of docs/method.md#verdict
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
        from .embeddings import top_k  # numpy: the eval extra, only when RAG runs

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


__all__ = [
    "DirectDetector",
    "RagDetector",
]
