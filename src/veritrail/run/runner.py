"""Run orchestration shared by the CLI and the Python API: inputs in, report dict out."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..dag import Dag
from ..lm.model import Model
from ..method.config import VerifyConfig
from ..method.loop import OnResult, lm_steps, verify_claims
from ..method.segment import SentenceIndex
from ..method.steps import Steps
from ..records import Claim, ClaimResult
from ..report import build_report


async def run_verification(
    dag: Dag,
    claims: Sequence[Claim],
    config: VerifyConfig,
    *,
    model: Model | None = None,
    steps: Steps | None = None,
    on_result: OnResult | None = None,
    done: Sequence[ClaimResult] = (),
    dag_path: str | None = None,
    run_info: dict[str, Any] | None = None,
) -> tuple[list[ClaimResult], dict[str, Any]]:
    """Verify `claims` (skipping those already in `done`) and build the report.

    Exactly one of `steps` (e.g. the oracle) or `model` (LM-based steps) is needed; with both,
    `steps` runs and `model` only provides accounting.
    """
    if steps is None:
        if model is None:
            raise ValueError("give a model or steps")
        steps = lm_steps(model)
    finished = {r.claim.id: r for r in done}
    todo = [c for c in claims if c.id not in finished]
    new = await verify_claims(
        dag, todo, steps, config, sentences=SentenceIndex(dag), on_result=on_result, model=model
    )
    by_id = {**finished, **{r.claim.id: r for r in new}}
    results = [by_id[c.id] for c in claims]
    report = build_report(
        results,
        dag,
        model=model.name if model is not None else "oracle",
        config=dataclasses.asdict(config),
        run=run_info,
        dag_path=dag_path,
    )
    return results, report
