"""`rounds.next_round`, the one function that decides candidates and termination (SPEC §4.4):
the loop's recorded iterations are repeated `next_round` calls, and the dry-run estimate, which
uses the same function, agrees with the loop on the rounds when every claim's evidence is known."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail import Claim, Termination, Verdict, VerifyConfig
from veritrail.dag import Dag
from veritrail.method.loop import verify_claim
from veritrail.method.oracle import Oracle
from veritrail.method.plans import ReadPlan
from veritrail.method.rounds import GrowingSet, Round, first_round, next_round
from veritrail.method.segment import SentenceIndex
from veritrail.run.estimate import estimate_run

LABELS = [v.value for v in Verdict]
CLAIM = "The claim."


@st.composite
def small_dag(draw: st.DrawFn) -> Dag:
    n = draw(st.integers(min_value=2, max_value=12))
    ids = [f"n{i}" for i in range(n)]
    records: list[dict[str, Any]] = []
    for i, nid in enumerate(ids[:-1]):
        k = draw(st.integers(0, min(3, i)))
        srcs = (
            draw(st.lists(st.sampled_from(ids[:i]), min_size=k, max_size=k, unique=True))
            if i
            else []
        )
        size = draw(st.integers(1, 4))
        text = " ".join(f"Fact {j} about item {nid} holds." for j in range(size))
        records.append({"id": nid, "text": text, "sources": srcs})
    used = {s for r in records for s in r["sources"]}
    term_src = [r["id"] for r in records if r["id"] not in used]
    extra = draw(st.lists(st.sampled_from(ids[:-1]), max_size=2, unique=True))
    records.append(
        {"id": ids[-1], "text": "The final output.", "sources": sorted(set(term_src) | set(extra))}
    )
    return Dag.from_records(records)


def _run(dag: Dag, doc: dict[str, Any], cfg: VerifyConfig) -> Any:
    res = asyncio.run(
        verify_claim(dag, SentenceIndex(dag), Claim("c", CLAIM), Oracle.from_dict(doc).steps(), cfg)
    )
    assert res.error is None, res.error
    return res


@settings(max_examples=120, deadline=None)
@given(
    small_dag(),
    st.data(),
    st.integers(1, 3),
    st.integers(1, 5),
)
def test_loop_iterations_are_repeated_next_round_calls(
    dag: Dag, data: st.DataObject, q: int, limit: int
) -> None:
    non_terminal = [n.id for n in dag if n.id != dag.terminal]
    evidence = {
        nid: data.draw(st.lists(st.integers(0, 4), max_size=2, unique=True))
        for nid in data.draw(st.lists(st.sampled_from(non_terminal), unique=True))
    }
    verdicts = data.draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=6))
    doc = {"claims": [{"claim": CLAIM, "evidence": evidence, "verdicts": verdicts}]}
    cfg = VerifyConfig(q=q, evidence_sentences_root=limit, evidence_sentences_nonroot=limit)
    res = _run(dag, doc, cfg)

    sentences = SentenceIndex(dag)
    state: Round = first_round(dag)
    for k, it in enumerate(res.iterations):
        assert state.termination is None
        assert set(it.nodes_checked) == state.to_read
        assert it.carried_roots == state.carried
        plan = ReadPlan(dag, sentences, state.to_read, cfg)
        assert plan.to_read == it.nodes_checked  # the loop reads in plan order
        state = next_round(state, plan, it.nodes_with_evidence, it.verdict, dag, cfg)
        last = k == len(res.iterations) - 1
        assert (state.termination is not None) == last
    assert state.termination is res.termination
    assert state.final_verdict is res.verdict
    assert len(state.checked) == res.cost.nodes_read
    if res.termination is Termination.ROOTS_ONLY:
        assert state.final_verdict is res.iterations[-1].verdict


@settings(max_examples=80, deadline=None)
@given(small_dag(), st.integers(1, 3), st.integers(1, 5), st.sampled_from(LABELS[:2]))
def test_estimate_and_loop_agree_on_the_rounds_when_the_evidence_is_known(
    dag: Dag, q: int, limit: int, label: str
) -> None:
    # The estimator's assumption made true: every node read yields evidence, and every verdict
    # is Not Fully Supported ("estimate") or Fully Supported ("upper").
    evidence = {n.id: [0] for n in dag if n.id != dag.terminal}
    doc = {"claims": [{"claim": CLAIM, "evidence": evidence, "verdicts": [label]}]}
    cfg = VerifyConfig(q=q, evidence_sentences_root=limit, evidence_sentences_nonroot=limit)
    res = _run(dag, doc, cfg)
    est = estimate_run(dag, [Claim("c", CLAIM)], cfg)
    scenario = est.estimate if label == Verdict.NOT_FULLY_SUPPORTED.value else est.upper
    assert scenario.iterations == len(res.iterations)
    assert scenario.nodes_read == res.cost.nodes_read
    # One verdict call per round with evidence or carried roots; prompts as the loop batched them.
    assert scenario.steps["verdict"].calls == sum(it.verdict_called_lm for it in res.iterations)
    sentences = SentenceIndex(dag)
    prompts = sum(
        len(ReadPlan(dag, sentences, it.nodes_checked, cfg).batches) for it in res.iterations
    )
    assert scenario.steps["evidence_selection"].calls == prompts


def test_rule_order_and_the_rule_3_shortcut() -> None:
    # terminal T <- a <- r (root). Round 1 reads a; NFS widens to r.
    dag = Dag.from_records(
        [
            {"id": "r", "text": "Root.", "sources": []},
            {"id": "a", "text": "Middle.", "sources": ["r"]},
            {"id": "T", "text": "Final.", "sources": ["a"]},
        ]
    )
    idx = SentenceIndex(dag)
    s0 = first_round(dag)
    assert s0.nodes_to_check == {"a"} and s0.to_read == {"a"} and s0.carried == ()
    p0 = ReadPlan(dag, idx, s0.to_read, VerifyConfig())
    # q = 1: rule 3 once an unchecked candidate exists.
    s1 = next_round(s0, p0, (), Verdict.NOT_FULLY_SUPPORTED, dag, VerifyConfig(q=1))
    assert s1.termination is Termination.Q_CONSECUTIVE_NFS
    assert s1.final_verdict is Verdict.NOT_FULLY_SUPPORTED and s1.checked == {"a"}
    # q = 3: widen to r; r yields evidence, Fully Supported: only roots with evidence are left.
    s1 = next_round(s0, p0, (), Verdict.NOT_FULLY_SUPPORTED, dag, VerifyConfig(q=3))
    assert s1.termination is None and s1.nodes_to_check == {"r"} and s1.consecutive_nfs == 1
    p1 = ReadPlan(dag, idx, s1.to_read, VerifyConfig())
    s2 = next_round(s1, p1, ("r",), Verdict.FULLY_SUPPORTED, dag, VerifyConfig(q=3))
    assert s2.termination is Termination.ROOTS_ONLY and s2.final_verdict is Verdict.FULLY_SUPPORTED
    assert s2.roots_with_evidence == {"r"} and s2.consecutive_nfs == 0
    # Nothing found in r: no candidates left, Not Fully Supported even after Fully Supported
    # (SPEC §4.4 follows the prose, not the pseudo-code).
    s2 = next_round(s1, p1, (), Verdict.FULLY_SUPPORTED, dag, VerifyConfig(q=3))
    assert s2.termination is Termination.NO_CANDIDATES
    assert s2.final_verdict is Verdict.NOT_FULLY_SUPPORTED
    # Rule 3 reached with only roots with evidence left: rule 1 wins (tested first).
    s2 = next_round(s1, p1, ("r",), Verdict.NOT_FULLY_SUPPORTED, dag, VerifyConfig(q=2))
    assert s2.termination is Termination.ROOTS_ONLY
    assert s2.final_verdict is Verdict.NOT_FULLY_SUPPORTED


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.lists(st.sampled_from("abcdefghij"), max_size=4)),
        max_size=30,
    )
)
def test_a_growing_set_is_a_frozenset_whatever_value_it_grows_from(
    steps: list[tuple[int, list[str]]],
) -> None:
    # Each step extends some earlier value (the newest one, the loop's case, or an older one, a
    # branch); every value ever made must still hold exactly what a frozenset would.
    values: list[tuple[GrowingSet, frozenset[str]]] = [(GrowingSet(), frozenset())]
    for pick, nodes in steps:
        base, model = values[pick % len(values)]
        values.append((base.union(nodes), model.union(nodes)))
        for grown, expected in values:
            assert grown == expected and len(grown) == len(expected)
            assert set(grown) == expected
            assert all((n in grown) == (n in expected) for n in "abcdefghijk")
            assert hash(grown) == hash(expected)
