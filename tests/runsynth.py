"""Synthetic run directories written by the real writers (`RunStore`, `build_report`), for the
index tests (tests/runs), the runs benchmark (benchmarks/bench_runs.py) and `veritrail view`'s.

`write_run(root, name, ...)` makes one run directory as `veritrail verify` leaves it: run.json
and claims.json by `RunStore.create_or_open`, results.jsonl by `RunStore.record_lines`, the
report by `build_report` + `RunStore.write_report`, the status by `RunStore.set_status`. Claims
are made up, deterministically from `seed`: every `unsupported_every`-th claim is Not Fully
Supported with an error stage, the rest Fully Supported with a provenance path to a root.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from veritrail.dag import Dag
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SentenceRef,
    Termination,
    Verdict,
)
from veritrail.report import build_report
from veritrail.run.store import RunStore, Status, result_line

ROOTS = 6


def dag_records(pipeline: str = "summary") -> dict[str, Any]:
    """A small 3-stage DAG document: 6 roots, 3 summaries, a terminal."""
    nodes: list[dict[str, Any]] = [
        {"id": f"r{i}", "text": f"Chunk {i} says fact {i} holds. It was seen in place {i}."}
        for i in range(ROOTS)
    ]
    nodes += [
        {
            "id": f"m{j}",
            "text": f"Facts {2 * j} and {2 * j + 1} hold.",
            "sources": [f"r{2 * j}", f"r{2 * j + 1}"],
        }
        for j in range(ROOTS // 2)
    ]
    nodes.append({"id": "t", "text": "All facts hold.", "sources": [f"m{j}" for j in range(3)]})
    return {"meta": {"pipeline": pipeline}, "nodes": nodes}


def write_dag(path: Path, pipeline: str = "summary") -> Path:
    """Write `dag_records` to `path` (once: kept if it exists)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dag_records(pipeline)), encoding="utf-8")
    return path


def claim_text(i: int) -> str:
    return f"Fact {i % ROOTS} holds in place {i}."


def make_result(i: int, *, unsupported: bool, claim_id: str | None = None) -> ClaimResult:
    """One made-up finished claim."""
    root = f"r{i % ROOTS}"
    mid = f"m{(i % ROOTS) // 2}"
    verdict = Verdict.NOT_FULLY_SUPPORTED if unsupported else Verdict.FULLY_SUPPORTED
    it = Iteration(
        index=1,
        nodes_checked=(mid,),
        carried_roots=(),
        nodes_with_evidence=() if unsupported else (mid,),
        evidence=() if unsupported else (SentenceRef(mid, 0, f"Facts {i} hold."),),
        summaries=(),
        dropped_ids=(),
        verdict=verdict,
        reasoning="made up",
        verdict_called_lm=not unsupported,
    )
    return ClaimResult(
        claim=Claim(claim_id or f"c{i}", claim_text(i)),
        subclaims=(claim_text(i),),
        verdict=verdict,
        reasoning="made up",
        termination=Termination.Q_CONSECUTIVE_NFS if unsupported else Termination.ROOTS_ONLY,
        iterations=(it,),
        provenance=() if unsupported else ((mid, root),),
        error_stages=(2,) if unsupported else (),
        error_stage_status=(
            ErrorStageStatus.IDENTIFIED if unsupported else ErrorStageStatus.NOT_APPLICABLE
        ),
        cost=Cost(lm_calls=3, input_tokens=900, output_tokens=60, dollars=0.0012, nodes_read=2),
    )


def write_run(
    root: Path,
    name: str,
    *,
    claims: int = 50,
    unsupported_every: int = 5,
    model: str = "openai/gpt-4o-mini",
    dag_name: str = "summary",
    pipeline: str = "summary",
    created: float | None = None,
    finished: int | None = None,
    status: str = Status.COMPLETE,
    seed: int = 0,
) -> Path:
    """One run directory `root/name`; `finished` claims recorded (all by default: then the
    report is written too)."""
    dag_path = write_dag(root.parent / "dags" / f"{dag_name}.json", pipeline)
    dag = Dag.from_records(dag_records(pipeline)["nodes"])
    n_done = claims if finished is None else finished
    results = [
        make_result(seed + i, unsupported=(i % unsupported_every == unsupported_every - 1))
        for i in range(claims)
    ]
    results = [
        dataclasses.replace(r, claim=Claim(f"c{i}", r.claim.text)) for i, r in enumerate(results)
    ]
    store = RunStore.create_or_open(
        root / name,
        fingerprint=f"{seed:012x}{name}"[:64].ljust(64, "0"),
        dag_path=dag_path,
        dag_sha256="0" * 64,
        model=model,
        config={"q": 3},
        claims=[r.claim for r in results],
    )
    try:
        store.record_lines([result_line(r) for r in results[:n_done]])
        if created is not None:
            store.info = dataclasses.replace(store.info, created=created)
        if n_done == claims:
            store.write_report(
                build_report(results, dag, model=model, config={"q": 3}, dag_path=str(dag_path))
            )
        store.set_status(status)
    finally:
        store.unlock()
    return root / name
