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
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import reportkit
from scalekit import assert_linear
from veritrail.batch.summary import (
    JobOutcome,
    summary_document,
    summary_table,
    write_index,
    write_summary,
)
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

# Each guard times the same work at two sizes (seconds to a minute): opt-in, CI runs them.
pytestmark = pytest.mark.scale

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


def rounds_of_a_trail(n: int, tmp: Path) -> Callable[[], object]:
    """The loop's own state, round after round, as `method.loop` drives it: what a trail of N
    rounds costs besides the steps. This is where `checked` was copied at every round."""
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


def one_claim_through_a_trail(n: int, tmp: Path) -> Callable[[], object]:
    """The whole loop with oracle steps: evidence, verdicts, iterations, provenance."""
    dag, oracle = walk_everything(n)

    def work() -> object:
        (r,) = asyncio.run(verify_claims(dag, [Claim("c1", CLAIM)], oracle.steps(), VerifyConfig()))
        assert len(r.provenance[0]) == n - 1
        return r

    return work


# -- the report and HTML of a long trail -------------------------------------------------------


def report_of_a_trail(n: int, tmp: Path) -> Callable[[], object]:
    """report.json's document and text, and report.html, of one claim through a chain."""
    dag, results = trail_results(n)

    def work() -> object:
        report = build_report(results, dag, model="oracle", config={})
        return len(indented_json(report)) + len(render_html(report))

    return work


# -- validating a large DAG --------------------------------------------------------------------


def load_a_dag(n: int, tmp_path: Path) -> Callable[[], object]:
    """`load_dag` (reading and validating) of a chain with a second, longer edge into every
    node: many sources, one long topological order, computed stages."""
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


# -- a batch summary of many runs ----------------------------------------------------------------


def summary_of_a_batch(n: int, tmp_path: Path) -> Callable[[], object]:
    """The batch summary document, file, HTML index and terminal table of `n` jobs."""
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


# -- the run store's resume of many claims -----------------------------------------------------


def resume_a_run(n: int, tmp_path: Path) -> Callable[[], object]:
    """Recording every claim's result as it finishes, then opening the run again to resume."""
    _, (one,) = trail_results(3)
    claims = [Claim(f"c{i}", f"Claim number {i} holds.") for i in range(n)]
    results = [dataclasses.replace(one, claim=c) for c in claims]
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


# -- veritrail diff of two runs ----------------------------------------------------------------


def diff_reports(n: int, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two reports of `n` claims each, as two runs of one pipeline differ: every claim with two
    iterations of evidence and a provenance path; in B 5% of verdicts flipped, 10% of claims
    with other evidence, 1% reworded (unmatched on both sides), 2% sharing a text (duplicates).
    benchmarks/bench_diff.py times `veritrail diff` on them at 5,000 claims."""
    import random

    rng = random.Random(seed)
    verdicts = [Verdict.FULLY_SUPPORTED.value] * 8 + [
        Verdict.NOT_FULLY_SUPPORTED.value,
        Verdict.INCONCLUSIVE.value,
    ]

    def claim(i: int, text: str, verdict: str, shift: int) -> dict[str, Any]:
        ev = [
            {"node_id": f"s{(i + k) % 400}", "sentence_index": k + shift, "text": f"Fact {i}."}
            for k in range(3)
        ]
        roots = [
            {"node_id": f"r{(i + k) % 4000}", "sentence_index": k, "text": f"Root fact {i}."}
            for k in range(2)
        ]
        nfs = verdict == Verdict.NOT_FULLY_SUPPORTED.value
        return {
            "id": f"c{i}",
            "text": text,
            "sentence_indices": [i % 50],
            "subclaims": [text],
            "verdict": verdict,
            "reasoning": f"Reasoning about claim {i}. " * 4,
            "termination": "roots_only",
            "iterations": [
                {
                    "index": 1,
                    "nodes_checked": [f"s{(i + k) % 400}" for k in range(6)],
                    "nodes_with_evidence": sorted({e["node_id"] for e in ev}),
                    "evidence": ev,
                    "summaries": [{"node_ids": [ev[0]["node_id"]], "text": f"Summary {i}."}],
                    "verdict": Verdict.FULLY_SUPPORTED.value,
                },
                {
                    "index": 2,
                    "nodes_checked": [f"r{(i + k) % 4000}" for k in range(6)],
                    "nodes_with_evidence": sorted({e["node_id"] for e in roots}),
                    "evidence": roots,
                    "summaries": [],
                    "verdict": verdict,
                },
            ],
            "provenance": [] if nfs else [[ev[0]["node_id"], roots[0]["node_id"]]],
            "error_stages": [2] if nfs else [],
            "error_stage_status": "identified" if nfs else "not_applicable",
        }

    def report(claims: list[dict[str, Any]]) -> dict[str, Any]:
        nodes = [{"id": f"r{i}", "stage": 1, "is_root": True} for i in range(4000)]
        nodes += [{"id": f"s{i}", "stage": 2, "is_root": False} for i in range(400)]
        # Complete documents (the diff validates its reports: report_model), version 1.
        return reportkit.report(
            claims,
            version=1,
            model="openai/bench",
            dag={"terminal": "t", "max_stage": 3, "nodes_touched": nodes},
        )

    a_claims, b_claims = [], []
    for i in range(n):
        text = f"Claim {i % (n - n // 50)} says item {i % (n - n // 50)} holds."
        v = rng.choice(verdicts)
        a_claims.append(claim(i, text, v, 0))
        r = rng.random()
        v_b = rng.choice(verdicts) if r < 0.05 else v
        text_b = f"Reworded claim {i}." if 0.05 <= r < 0.06 else text
        b_claims.append(claim(i, text_b, v_b, 1 if 0.06 <= r < 0.16 else 0))
    return report(a_claims), report(b_claims)


def diff_two_runs(n: int, tmp_path: Path) -> Callable[[], object]:
    """`veritrail diff` in-process: read two reports of n claims, match, bootstrap, and write
    the JSON and HTML diffs and the terminal tables."""
    import io

    from rich.console import Console

    from veritrail.runs.diff import diff_document, diff_paths
    from veritrail.runs.diffhtml import render_diff_html
    from veritrail.runs.difftable import diff_tables

    a, b = diff_reports(n)
    pa, pb = tmp_path / f"a{n}.json", tmp_path / f"b{n}.json"
    pa.write_text(indented_json(a), encoding="utf-8")
    pb.write_text(indented_json(b), encoding="utf-8")

    def work() -> object:
        d = diff_paths(pa, pb)
        doc = diff_document(d, max_new_unsupported=0)
        console = Console(width=160, file=io.StringIO())
        console.print(diff_tables(d, limit=-1))
        return indented_json(doc), render_diff_html(doc)

    return work


# -- the index of runs: rebuilt from the run directories -----------------------------------------


def reindex_runs(n: int, tmp_path: Path) -> Callable[[], object]:
    """`veritrail runs reindex` of `n` run directories of 20 claims (SQLite): every run read
    and its claims inserted. benchmarks/bench_runs.py times it at 1,000 runs of 50 claims."""
    import shutil

    from runsynth import write_run
    from veritrail.runs import open_index

    root = tmp_path / f"runs{n}"
    template = write_run(tmp_path / f"template{n}", "t-000000000000", claims=20)
    root.mkdir()
    for i in range(n):
        shutil.copytree(template, root / f"r-{i:012x}")
    index = open_index(root)
    index.reindex()  # the tables created and the files in the page cache before timing

    def work() -> object:
        stats = index.reindex()
        assert stats.added == n
        return stats

    return work


# name -> (workload, small size, repetitions); benchmarks/bench_scale.py runs them at full size.
WORKLOADS: dict[str, tuple[Callable[[int, Path], Callable[[], object]], int, int]] = {
    "next_round over a chain": (rounds_of_a_trail, 5_000, 3),
    "one claim through a chain": (one_claim_through_a_trail, 3_000, 2),
    "report.json and report.html of a chain": (report_of_a_trail, 4_000, 3),
    "load_dag of a DAG file": (load_a_dag, 20_000, 3),
    "batch summary, index and table": (summary_of_a_batch, 500, 3),
    "run store: record every claim, then open it to resume": (resume_a_run, 500, 2),
    "veritrail diff of two runs": (diff_two_runs, 500, 3),
    "runs reindex of run directories": (reindex_runs, 40, 3),
}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_grows_linearly(name: str, tmp_path: Path) -> None:
    make, small, repeat = WORKLOADS[name]
    assert_linear(name, lambda n: make(n, tmp_path), small, repeat=repeat)
