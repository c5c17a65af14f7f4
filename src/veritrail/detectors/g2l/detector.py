"""G2LDetect behind the package's one detector protocol (`detectors.base.Detector`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...dag import Dag
from ...lm.model import Model, claim_scope
from ...method.segment import SentenceIndex
from ...records import Claim, GoldClaim, Verdict
from ..base import Detection, claim_cost, error_text, root_ids
from .method import g2l_claim
from .records import G2LConfig
from .references import Reference, references_from_dag


class G2LDetector:
    """G2LDetect as a `Detector` (`detectors.base`): each claim's text is checked with
    `g2l_claim` against the DAG's sources, claims concurrently.

    `references` says how the DAG is shown to the model: by default its root nodes, sorted by id
    and labelled ``node <id>`` (`references_from_dag`, as `veritrail eval` and ``veritrail detect
    --dag`` always did); ``veritrail detect --text --refs`` labels them by file name instead.
    Verdict: PASSED → Fully Supported, FAILED → Not Fully Supported, otherwise none; the score is
    the share of supported paths; `Detection.native` is the `G2LResult` (tree and paths).
    """

    kind = "g2l"

    def __init__(
        self,
        model: Model,
        config: G2LConfig | None = None,
        *,
        name: str = "G2LDetect",
        references: Callable[[Dag], Sequence[str | Reference]] = references_from_dag,
    ) -> None:
        self.name = name
        self.model = model
        self.config = config
        self.references = references

    async def detect(
        self,
        dag: Dag,
        claims: Sequence[Claim],
        *,
        sentences: SentenceIndex | None = None,
        gold: Mapping[str, GoldClaim] | None = None,
    ) -> list[Detection]:
        """One G2LDetect run per claim (tree, paths, checks), claims concurrently."""
        refs = list(self.references(dag))
        n_roots = len(root_ids(dag))

        async def one(c: Claim) -> Detection:
            scope = f"{self.name}::{c.id}"
            error: str | None = None
            verdict: Verdict | None = None
            score: float | None = None
            native: Any = None
            with claim_scope(scope):
                try:
                    out = await g2l_claim(self.model, c, refs, self.config)
                    verdict, score, native = out.verdict, out.score, out.result
                except Exception as exc:  # noqa: BLE001 - recorded per claim
                    error, native = error_text(exc), exc
            cost = claim_cost(self.model, scope)
            return Detection(
                method=self.name,
                claim_id=c.id,
                verdict=verdict,
                score=score,
                lm_calls=cost.lm_calls,
                input_tokens=cost.input_tokens,
                output_tokens=cost.output_tokens,
                dollars=cost.dollars,
                nodes_read=n_roots,
                nodes_total=len(dag),
                error=error,
                native=native,
            )

        return list(await asyncio.gather(*(one(c) for c in claims)))


__all__ = ["G2LDetector"]
