"""Property tests of the loop on random DAGs with a random oracle (SPEC §4.4 invariants)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail import Claim, Termination, Verdict, VerifyConfig
from veritrail.dag import Dag
from veritrail.method.context import RunContext
from veritrail.method.loop import verify_claim, verify_claim_in
from veritrail.method.oracle import Oracle
from veritrail.method.plans import ReadPlans
from veritrail.method.segment import SentenceIndex

LABELS = [v.value for v in Verdict]


@st.composite
def dag_and_oracle(draw: st.DrawFn) -> tuple[Dag, dict[str, Any], int, int]:
    n = draw(st.integers(min_value=2, max_value=14))
    ids = [f"n{i}" for i in range(n)]
    records = []
    for i, nid in enumerate(ids[:-1]):
        k = draw(st.integers(0, min(3, i)))
        srcs = (
            draw(st.lists(st.sampled_from(ids[:i]), min_size=k, max_size=k, unique=True))
            if i
            else []
        )
        size = draw(st.integers(1, 6))
        records.append(
            {
                "id": nid,
                "text": " ".join(f"Fact {j} about item {nid} holds." for j in range(size)),
                "sources": srcs,
            }
        )
    # Every non-terminal node without a consumer feeds the terminal, so there is exactly one.
    used = {s for r in records for s in r["sources"]}
    term_src = [r["id"] for r in records if r["id"] not in used]
    extra = draw(st.lists(st.sampled_from(ids[:-1]), max_size=2, unique=True))
    records.append(
        {
            "id": ids[-1],
            "text": "The final output states one thing.",
            "sources": sorted(set(term_src) | set(extra)),
        }
    )
    dag = Dag.from_records(records)
    evidence = {
        nid: draw(st.lists(st.integers(0, 8), max_size=3, unique=True))
        for nid in draw(st.lists(st.sampled_from(ids[:-1]), max_size=n, unique=True))
    }
    verdicts = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=6))
    q = draw(st.integers(1, 3))
    limit = draw(st.integers(1, 5))
    oracle = {"claims": [{"claim": "The claim.", "evidence": evidence, "verdicts": verdicts}]}
    return dag, oracle, q, limit


def reference_run(dag: Dag, res: Any, q: int) -> tuple[list[set[str]], Termination]:
    """SPEC §4.4 steps 4-5 transcribed literally, replayed over the recorded verdicts: the node
    set each iteration must check (read + carried) and the rule that must end the loop."""
    checked: set[str] = set()
    roots_with_ev: set[str] = set()
    consec = 0
    expected = [set(dag.sources(dag.terminal))]
    for it in res.iterations:
        checked |= set(it.nodes_checked)
        roots_with_ev |= {n for n in it.nodes_with_evidence if dag.is_root(n)}
        nfs = it.verdict is Verdict.NOT_FULLY_SUPPORTED
        consec = consec + 1 if nfs else 0
        basis = it.nodes_checked if nfs else it.nodes_with_evidence
        candidates = {s for n in basis for s in dag.sources(n)}
        nodes_to_check = (candidates - checked) | roots_with_ev
        if nodes_to_check and nodes_to_check == roots_with_ev:
            return expected, Termination.ROOTS_ONLY
        if not nodes_to_check:
            return expected, Termination.NO_CANDIDATES
        if consec == q:
            return expected, Termination.Q_CONSECUTIVE_NFS
        expected.append(nodes_to_check)
    raise AssertionError("the loop stopped although no rule held")


@settings(max_examples=150, deadline=None)
@given(dag_and_oracle())
def test_loop_invariants(case: tuple[Dag, dict[str, Any], int, int]) -> None:
    dag, oracle_doc, q, limit = case
    oracle = Oracle.from_dict(oracle_doc)
    sentences = SentenceIndex(dag)
    cfg = VerifyConfig(q=q, evidence_sentences_root=limit, evidence_sentences_nonroot=limit)
    res = asyncio.run(verify_claim(dag, sentences, Claim("c", "The claim."), oracle.steps(), cfg))
    assert res.error is None, res.error

    # The trail never holds a sentence that is not in its node.
    for it in res.iterations:
        for e in it.evidence:
            assert 0 <= e.sentence_index < len(sentences.sentences(e.node_id))
            assert sentences.sentences(e.node_id)[e.sentence_index] == e.text
            assert e.node_id in it.nodes_checked
        assert set(it.nodes_with_evidence) == {e.node_id for e in it.evidence}
        # Listed indices past a node's end are dropped and recorded, never selected.
        for nid in it.nodes_checked:
            n_sent = len(sentences.sentences(nid))
            over = [i for i in oracle.answers["The claim."].evidence.get(nid, ()) if i >= n_sent]
            assert len([d for d in it.dropped_ids if d.startswith(f"{nid}#")]) == len(over)

    # No node is read twice for one claim; carried roots are never re-read.
    read = [n for it in res.iterations for n in it.nodes_checked]
    assert len(read) == len(set(read))
    for it in res.iterations:
        assert not set(it.carried_roots) & set(it.nodes_checked)
        assert all(dag.is_root(r) for r in it.carried_roots)
    assert dag.terminal not in read

    # Shared read plans (cached per run for large rounds; forced here for every round) change
    # nothing: the same claim on the same run gives the same result. (The run's plans live in its
    # `RunContext` now, not in a module-level cache keyed by the sentence index.)
    run2 = SentenceIndex(dag)
    plans = ReadPlans(dag, run2, cfg, min_nodes=1)
    ctx = RunContext(dag, run2, Oracle.from_dict(oracle_doc).steps(), cfg, plans)
    cached = [
        asyncio.run(verify_claim_in(replace(ctx, steps=o.steps()), Claim("c", "The claim.")))
        for o in (Oracle.from_dict(oracle_doc), Oracle.from_dict(oracle_doc))
    ]
    if len(res.iterations) <= plans.max_plans:  # each round reads a new set: one plan each
        assert plans.hits == len(res.iterations)  # the second run built none
    for again in cached:
        assert (again.verdict, again.termination, again.iterations) == (
            res.verdict,
            res.termination,
            res.iterations,
        )

    # Each iteration checks exactly the set the method prescribes, and the loop stops at the
    # first rule that holds (the engine short-cuts rule 3 and caches read plans; this pins it).
    expected, rule = reference_run(dag, res, q)
    assert [set(it.nodes_checked) | set(it.carried_roots) for it in res.iterations] == expected
    assert res.termination is rule

    # Termination is one of the three conditions, and the final verdict follows it.
    assert res.termination in (
        Termination.ROOTS_ONLY,
        Termination.NO_CANDIDATES,
        Termination.Q_CONSECUTIVE_NFS,
    )
    if res.termination is not Termination.ROOTS_ONLY:
        assert res.verdict is Verdict.NOT_FULLY_SUPPORTED
    else:
        assert res.verdict is res.iterations[-1].verdict
    if res.termination is Termination.Q_CONSECUTIVE_NFS:
        tail = [it.verdict for it in res.iterations[-q:]]
        assert tail == [Verdict.NOT_FULLY_SUPPORTED] * q
    # An iteration without evidence and without carried roots is NFS with no verdict call.
    for it in res.iterations:
        if not it.evidence and not it.carried_roots:
            assert it.verdict is Verdict.NOT_FULLY_SUPPORTED and not it.verdict_called_lm

    # Provenance paths run through evidence nodes along real edges.
    ev_nodes = {n for it in res.iterations for n in it.nodes_with_evidence}
    for path in res.provenance:
        assert path[0] in dag.sources(dag.terminal)
        assert set(path) <= ev_nodes
        for a, b in itertools.pairwise(path):
            assert b in dag.sources(a)
    assert res.cost.nodes_read == len(set(read))
