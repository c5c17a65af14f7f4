"""A model-free stage baseline: the earliest stage whose text holds a claim's words.

``veritrail eval --method earliest-stage[:coverage=0.8]`` (`EarliestStageDetector`). RAG and
direct verification give a verdict but no stage; this baseline gives both, with no model, so
VeriTrail's error stages have something simple to beat (docs/inject.md):

* a node *holds* a claim when at least `coverage` of the claim's content words (lower-cased
  words that are not function words) occur among the node's words;
* verdict: Fully Supported when some root node holds the claim, else Not Fully Supported;
  score: the best root's share of the claim's content words;
* error stage (Not Fully Supported only): the earliest stage with a node that holds the claim
  (the final output's stage when none does), and the blamed nodes: that stage's nodes with the
  best share (``detail["blamed_nodes"]``).

It reads words only: a negation or a swapped name whose words occur elsewhere in the sources
passes it, which is what makes it a baseline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..dag import Dag, PerDag
from ..method.segment import SentenceIndex
from ..records import Claim, ErrorStageStatus, GoldClaim, Verdict
from .base import Detection, root_ids

_WORD = re.compile(r"[^\W_]+")

# Words that carry no content of their own (so they never decide whether a node holds a claim).
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "over",
        "under",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "he",
        "she",
        "they",
        "them",
        "his",
        "her",
        "their",
        "there",
        "here",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "not",
        "no",
        "nor",
        "so",
        "than",
        "then",
        "too",
        "very",
        "can",
        "could",
        "will",
        "would",
        "should",
        "may",
        "might",
        "must",
        "shall",
        "also",
        "just",
        "only",
        "such",
        "both",
        "each",
        "all",
        "any",
        "some",
        "most",
        "more",
        "other",
        "another",
        "one",
        "his",
        "him",
        "i",
        "we",
        "you",
        "our",
        "your",
        "my",
        "me",
        "us",
        "s",
        "t",
    ]
)

DEFAULT_COVERAGE = 0.8
"""The share of a claim's content words a node must hold."""


def content_words(text: str) -> frozenset[str]:
    """The lower-cased words of `text` that are not function words."""
    return frozenset(
        w for w in (m.lower() for m in _WORD.findall(text)) if w not in _FUNCTION_WORDS
    )


class EarliestStageDetector:
    """Verdict from the roots' word coverage; error stage = the earliest stage holding the claim."""

    kind = "earliest-stage"

    def __init__(self, name: str = "Earliest stage", *, coverage: float = DEFAULT_COVERAGE):
        if not 0.0 < coverage <= 1.0:
            raise ValueError(f"coverage={coverage}: use a share in (0, 1]")
        self.name = name
        self.coverage = coverage
        self._words: PerDag[dict[str, frozenset[str]]] = PerDag()

    def _node_words(self, dag: Dag) -> dict[str, frozenset[str]]:
        return self._words.get(dag, lambda d: {n.id: content_words(n.text) for n in d})

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """One detection per claim (no model call)."""
        words = self._node_words(dag)
        by_stage: dict[int, list[str]] = {}
        for n in dag:
            by_stage.setdefault(n.stage, []).append(n.id)
        return [self._one(dag, words, by_stage, c) for c in claims]

    def _one(
        self,
        dag: Dag,
        words: Mapping[str, frozenset[str]],
        by_stage: Mapping[int, list[str]],
        claim: Claim,
    ) -> Detection:
        want = content_words(claim.text)

        def share(nid: str) -> float:
            return len(want & words[nid]) / len(want) if want else 1.0

        roots = root_ids(dag)
        best_root = max((share(r) for r in roots), default=0.0)
        read = len(roots)
        if best_root >= self.coverage:
            return Detection(
                self.name,
                claim.id,
                Verdict.FULLY_SUPPORTED,
                score=best_root,
                nodes_read=read,
                nodes_total=len(dag),
                error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
                detail={"best_root_share": round(best_root, 4)},
            )
        stage = dag.stage(dag.terminal)
        blamed: list[str] = [dag.terminal]
        for s in sorted(by_stage):
            inner = [n for n in by_stage[s] if not dag.is_root(n)]
            read += len(inner)
            shares = {n: share(n) for n in inner}
            top = max(shares.values(), default=0.0)
            if top >= self.coverage:
                stage, blamed = s, [n for n in inner if shares[n] == top]
                break
        return Detection(
            self.name,
            claim.id,
            Verdict.NOT_FULLY_SUPPORTED,
            score=best_root,
            nodes_read=read,
            nodes_total=len(dag),
            error_stages=(stage,),
            error_stage_status=ErrorStageStatus.IDENTIFIED,
            detail={"best_root_share": round(best_root, 4), "blamed_nodes": blamed},
        )


__all__ = ["DEFAULT_COVERAGE", "EarliestStageDetector", "content_words"]
