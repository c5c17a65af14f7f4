"""VeriTrail itself as a `Detector`: a thin layer over `veritrail.method.loop.verify_claims`.

* `VeriTrailDetector` — the loop with given steps (the LM steps for ``veritrail eval
  --method veritrail:q=N``);
* `OracleDetector` — the loop with steps answered from the gold labels and gold evidence (an
  upper bound for the plumbing: evidence recall must be 1.0); it is the one detector that reads
  the `gold` argument of `Detector.detect`.

Both turn each `ClaimResult` into a `Detection` with `detection_from_result` (evidence = the root
sentences anywhere in the trail) and keep the `ClaimResult` itself in `Detection.native`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..dag import Dag
from ..method.config import VerifyConfig
from ..method.segment import SentenceIndex
from ..method.steps import Steps
from ..records import Claim, ClaimResult, GoldClaim
from .base import Detection


def detection_from_result(method: str, key: str, dag: Dag, r: ClaimResult) -> Detection:
    """Turn a loop result into a detection (evidence = root sentences anywhere in the trail)."""
    ev = frozenset(
        (s.node_id, s.sentence_index)
        for it in r.iterations
        for s in it.evidence
        if s.node_id in dag and dag.is_root(s.node_id)
    )
    return Detection(
        method=method,
        claim_id=key,
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
        native=r,
    )


class _LoopDetector:
    """What VeriTrail and its oracle share: run the loop, turn its results into detections."""

    def __init__(
        self,
        name: str,
        config: VerifyConfig,
        *,
        max_parallel_claims: int | None = 4,
    ) -> None:
        self.name = name
        self.config = config
        self.max_parallel_claims = max_parallel_claims

    def steps_for(self, claims: Sequence[Claim], gold: Mapping[str, GoldClaim] | None) -> Steps:
        """The steps to verify `claims` with."""
        raise NotImplementedError

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """Verify `claims` with the loop; one detection per claim."""
        from ..method.loop import verify_claims

        # Claim ids carry the detector's name so that one model's usage ledger keeps detectors
        # apart when several share it (as in `veritrail eval`).
        scoped = [Claim(f"{self.name}::{c.id}", c.text, c.sentence_indices) for c in claims]
        results = await verify_claims(
            dag,
            scoped,
            self.steps_for(claims, gold),
            self.config,
            sentences=sentences,
            max_parallel_claims=self.max_parallel_claims,
        )
        return [
            detection_from_result(self.name, c.id, dag, r)
            for c, r in zip(claims, results, strict=True)
        ]


def gold_oracle_steps(claims: Sequence[GoldClaim]) -> Steps:
    """Oracle steps from the gold data: select the first gold set, answer the gold label.

    Claims without gold evidence get no evidence (so the loop ends Not Fully Supported without a
    verdict call) — the oracle only knows what the labels say.
    """
    from ..method.oracle import Oracle

    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in claims:
        if c.text in seen:
            continue  # the oracle is keyed by text; a repeated claim gets the first entry
        seen.add(c.text)
        evidence: dict[str, list[int]] = {}
        if c.gold_evidence:
            for node, s in sorted(c.gold_evidence[0]):
                evidence.setdefault(node, []).append(s)
        entries.append({"claim": c.text, "evidence": evidence, "verdicts": [c.label.value]})
    return Oracle.from_dict({"claims": entries}).steps()


class VeriTrailDetector(_LoopDetector):
    """The VeriTrail loop with fixed steps (`veritrail.method.loop.lm_steps(model)` in eval)."""

    def __init__(
        self,
        name: str,
        steps: Steps,
        config: VerifyConfig,
        *,
        max_parallel_claims: int | None = 4,
    ) -> None:
        super().__init__(name, config, max_parallel_claims=max_parallel_claims)
        self.steps = steps

    def steps_for(self, claims: Sequence[Claim], gold: Mapping[str, GoldClaim] | None) -> Steps:
        return self.steps


class OracleDetector(_LoopDetector):
    """The loop with steps replaying the gold labels (`gold_oracle_steps`); needs `gold`."""

    def steps_for(self, claims: Sequence[Claim], gold: Mapping[str, GoldClaim] | None) -> Steps:
        if gold is None:
            raise ValueError(f"{self.name} replays gold labels: call detect(..., gold=...)")
        return gold_oracle_steps([gold[c.id] for c in claims if c.id in gold])


__all__ = [
    "OracleDetector",
    "VeriTrailDetector",
    "detection_from_result",
    "gold_oracle_steps",
]
