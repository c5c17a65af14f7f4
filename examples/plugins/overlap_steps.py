"""A complete veritrail step plugin with no language model: word-overlap rules for all three steps.

Use it from the command line (docs/plugins.md):

    veritrail verify dag.json --claims claims.json \
        --decomposer examples/plugins/overlap_steps.py:AndDecomposer \
        --selector examples/plugins/overlap_steps.py:OverlapSelector \
        --judge examples/plugins/overlap_steps.py:make_judge

or package it and declare entry points (then ``--judge overlap``):

    [project.entry-points."veritrail.steps"]
    overlap = "overlap_steps:make_judge"

The three classes implement the protocols of `veritrail.method.steps` (`Decomposer`,
`EvidenceSelector`, `VerdictGenerator`). They are deliberately simple (content-word overlap is
not a fact checker); they show the shapes of what each step receives and must return.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from veritrail.method.steps import (
    EvidenceBatch,
    RawSelection,
    StepContext,
    VerdictInput,
    VerdictOutcome,
)
from veritrail.records import Claim, Verdict

_STOP_WORDS = """a an the and or of in on at to for by with from is are was were be been it its this
    that as than then but not no"""
_STOP = frozenset(_STOP_WORDS.split())


def content_words(text: str) -> set[str]:
    """Lower-cased words of three letters or more that are not stop words."""
    return {w for w in re.findall(r"[^\W_]+", text.lower()) if len(w) >= 3 and w not in _STOP}


class AndDecomposer:
    """Splits a claim at " and " / ";" once; a claim with no such joint is final (one part)."""

    async def decompose(self, claim: Claim, text: str) -> Sequence[str]:
        """The parts of `text` (one part means: do not decompose further)."""
        parts = [p.strip(" .") for p in re.split(r";|\band\b", text) if p.strip(" .")]
        return parts if len(parts) > 1 and text == claim.text else [text]


class OverlapSelector:
    """Selects the sentences sharing at least `min_shared` content words with the claim."""

    def __init__(self, min_shared: int = 2) -> None:
        self.min_shared = min_shared

    async def select(
        self, claim: Claim, subclaims: Sequence[str], batch: EvidenceBatch, *, sample: int = 0
    ) -> RawSelection:
        """Prompt ids of the matching sentences, and a summary made of those sentences."""
        want = content_words(" ".join([claim.text, *subclaims]))
        ids: list[int] = []
        texts: list[str] = []
        for excerpt in batch.excerpts:
            for s in excerpt.sentences:
                if len(want & content_words(s.text)) >= self.min_shared:
                    ids.append(s.prompt_id)
                    texts.append(s.text)
        return RawSelection(ids=tuple(ids), summary=" ".join(texts))


class OverlapJudge:
    """Fully Supported when the evidence holds at least `share` of the claim's content words."""

    def __init__(self, share: float = 0.8) -> None:
        self.share = share

    async def judge(
        self,
        claim: Claim,
        subclaims: Sequence[str],
        evidence: Sequence[VerdictInput],
        *,
        sample: int = 0,
    ) -> VerdictOutcome:
        """The verdict with a one-line reason."""
        want = content_words(claim.text)
        have = content_words(" ".join(e.text for e in evidence))
        got = len(want & have) / len(want) if want else 0.0
        verdict = Verdict.FULLY_SUPPORTED if got >= self.share else Verdict.NOT_FULLY_SUPPORTED
        missing = ", ".join(sorted(want - have)) or "none"
        return VerdictOutcome(verdict, f"{got:.0%} of the claim's words found; missing: {missing}")


def make_judge(ctx: StepContext) -> OverlapJudge:
    """A factory: veritrail calls it with a StepContext (the step kind and the run's model)."""
    assert ctx.kind == "judge"
    return OverlapJudge()
