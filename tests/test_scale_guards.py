"""CI guards for the scale figures the project states (benchmarks/README.md, "Promises").

Each test does the same work at two sizes, 4x apart, and fails when its CPU time grows faster
than linearly (`scalekit.assert_linear`: bound 8 where linear is 4 and quadratic 16). The sizes
are far below the benchmarks' (the full-size figures are measured there) but large enough that
the super-linear steps these guards were written against dominate: a frozenset copied at every
round of a trail (`GrowingSet`), a provenance path copied at every step, a per-job scan of all
jobs, a run store re-read for every result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scalekit import assert_linear
from veritrail.batch.jobs import JobOutcome
from veritrail.batch.summary import summary_document, summary_table, write_index, write_summary
from veritrail.dag import Dag, load_dag
from veritrail.html import render_html
from veritrail.method.config import VerifyConfig
from veritrail.method.loop import verify_claims
from veritrail.method.oracle import Oracle
from veritrail.method.plans import ReadPlan
from veritrail.method.rounds import first_round, next_round
from veritrail.method.segment import SentenceIndex
from veritrail.records import Claim, ClaimResult, Termination, Verdict
from veritrail.report import build_report, indented_json
from veritrail.run.store import RunStore

CLAIM = "The chain of notes reaches its first entry."


def chain(n: int) -> Dag:
    """`n0` (the root) -> `n1` -> ... -> `n{n-1}` (the terminal), one sentence a node: a claim
    supported everywhere walks all of it, one node a round (benchmarks/bench_trail.py's DAG)."""
    records: list[dict[str, Any]] = [{"id": "n0", "text": "Entry 0 is the first note."}]
    records += [
        {"id": f"n{i}", "text": f"Entry {i} repeats entry {i - 1}.", "sources": [f"n{i - 1}"]}
        for i in range(1, n)
    ]
    return Dag.from_records(records)


def walk_everything(n: int) -> tuple[Dag, Oracle]:
    dag = chain(n)
    oracle = Oracle.from_dict(
        {
            "claims": [
                {
                    "claim": CLAIM,
                    "evidence": {f"n{i}": [0] for i in range(n - 1)},
                    "verdicts": ["Fully Supported"],
                }
            ]
        }
    )
    return dag, oracle


def trail_results(n: int) -> tuple[Dag, list[ClaimResult]]:
    dag, oracle = walk_everything(n)
    results = asyncio.run(verify_claims(dag, [Claim("c1", CLAIM)], oracle.steps(), VerifyConfig()))
    (r,) = results
    assert r.verdict is Verdict.FULLY_SUPPORTED and len(r.iterations) == n - 1
    return dag, results


# -- a claim through a long trail ------------------------------------------------------------


def test_the_rounds_of_a_long_trail_are_linear() -> None:
    # The loop's own state, round after round, as `method.loop` drives it: what a trail of N
    # rounds costs besides the steps. This is where `checked` was copied at every round.
    def make(n: int) -> Callable[[], object]:
        dag = chain(n)
        sentences = SentenceIndex(dag)
        cfg = VerifyConfig()
        plans = [ReadPlan(dag, sentences, frozenset({f"n{i}"}), cfg) for i in range(n - 1)]

        def work() -> object:
            state = first_round(dag)
            for plan in reversed(plans):
                assert state.to_read == set(plan.to_read)
                state = next_round(state, plan, plan.to_read, Verdict.FULLY_SUPPORTED, dag, cfg)
            assert state.termination is Termination.ROOTS_ONLY
            assert len(state.checked) == n - 1
            return state

        return work

    assert_linear("next_round over a chain", make, 5_000)


def test_one_claim_through_a_long_trail_is_linear() -> None:
    # The whole loop with oracle steps: evidence, verdicts, iterations, provenance.
    def make(n: int) -> Callable[[], object]:
        dag, oracle = walk_everything(n)

        def work() -> object:
            (r,) = asyncio.run(
                verify_claims(dag, [Claim("c1", CLAIM)], oracle.steps(), VerifyConfig())
            )
            assert len(r.provenance[0]) == n - 1
            return r

        return work

    assert_linear("one claim through a chain", make, 2_000, repeat=2)


# -- the report and HTML of a long trail -------------------------------------------------------


def test_the_report_and_html_of_a_long_trail_are_linear() -> None:
    def make(n: int) -> Callable[[], object]:
        dag, results = trail_results(n)

        def work() -> object:
            report = build_report(results, dag, model="oracle", config={})
            return len(indented_json(report)) + len(render_html(report))

        return work

    assert_linear("report.json and report.html of a chain", make, 2_000, repeat=2)


# -- validating a large DAG --------------------------------------------------------------------


def test_loading_and_validating_a_dag_is_linear(tmp_path: Path) -> None:
    # A chain with a second, longer edge into every node: many sources, one long topological
    # order, computed stages.
    def make(n: int) -> Callable[[], object]:
        nodes: list[dict[str, Any]] = [{"id": "n0", "text": "Root."}]
        nodes += [
            {
                "id": f"n{i}",
                "text": f"Node {i} says something.",
                "sources": sorted({f"n{i - 1}", f"n{i // 2}"}),
            }
            for i in range(1, n)
        ]
        path = tmp_path / f"dag{n}.json"
        path.write_text(json.dumps({"nodes": nodes}), encoding="utf-8")

        def work() -> object:
            dag = load_dag(path)
            assert len(dag) == n
            return dag

        return work

    assert_linear("load_dag of a DAG file", make, 10_000)


# -- a batch summary of many runs ----------------------------------------------------------------


def test_a_batch_summary_of_many_jobs_is_linear(tmp_path: Path) -> None:
    def make(n: int) -> Callable[[], object]:
        outcomes = [
            JobOutcome(
                id=f"job-{i}",
                status="complete",
                claims=10,
                verdicts={"Fully Supported": 8, "Not Fully Supported": 2},
                errors=0,
                missing=0,
                unsupported_rate=0.2,
                gate_failed=False,
                lm_calls=40,
                out=f"out/{i}.json",
                html=None,
                run_dir=f"runs/{i}",
            )
            for i in range(n)
        ]

        def work() -> object:
            doc = summary_document(
                outcomes, manifest="m.jsonl", executor="local", exit_code=0, wall_seconds=1.0
            )
            write_summary(doc, tmp_path / "batch-summary.json")
            write_index(doc, tmp_path / "batch-index.html")
            return summary_table(doc)

        return work

    assert_linear("batch summary, index and table", make, 500)


# -- the run store's resume of many claims -----------------------------------------------------


def test_resuming_a_run_of_many_claims_is_linear(tmp_path: Path) -> None:
    # Recording every claim's result as it finishes, then opening the run again to resume it.
    _, (one,) = trail_results(3)

    def make(n: int) -> Callable[[], object]:
        claims = [Claim(f"c{i}", f"Claim number {i} holds.") for i in range(n)]
        results = [ClaimResult(**{**_fields(one), "claim": c}) for c in claims]
        runs = tmp_path / f"runs{n}"
        counter = iter(range(1_000))

        def work() -> object:
            d = runs / str(next(counter))
            store = RunStore.create_or_open(
                d,
                fingerprint="f" * 64,
                dag_path=tmp_path / "dag.json",
                dag_sha256="0" * 64,
                model="oracle",
                config={},
                claims=claims,
            )
            for r in results:
                store.record(r)
            store.unlock()
            again = RunStore.open(d)
            assert len(again.done) == n and again.remaining() == []
            return again

        return work

    assert_linear("run store: record every claim, then open it to resume", make, 500, repeat=2)


def _fields(r: ClaimResult) -> dict[str, Any]:
    return {f: getattr(r, f) for f in r.__dataclass_fields__}
