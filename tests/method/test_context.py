"""The per-run context (issue 15, point 2): plans per run, costs from the steps' own models."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace

import pytest

from dagkit import make_dag
from veritrail import Claim, VerifyConfig
from veritrail.dag import Dag
from veritrail.lm import FakeProvider, Model
from veritrail.lm.base import Message
from veritrail.method.context import RunContext
from veritrail.method.evidence import LMEvidenceSelector
from veritrail.method.loop import lm_steps, verify_claim, verify_claims, verify_claims_in
from veritrail.method.oracle import Oracle
from veritrail.method.plans import ReadPlan, ReadPlans
from veritrail.method.segment import SentenceIndex
from veritrail.method.steps import Steps, VerdictOutcome
from veritrail.method.subclaims import LMDecomposer
from veritrail.records import Step, Verdict


def _dag() -> Dag:
    edges: dict[str, list[str]] = {f"c{i}": [] for i in range(6)}
    edges |= {"m1": ["c0", "c1", "c2"], "a0": ["c3", "c4"], "m0": ["c5", "c0"]}
    edges |= {"top": ["m1", "a0", "c2"], "z": ["m0"]}
    edges["final"] = ["top", "z"]
    return Dag.from_records(make_dag(edges)["nodes"])


def _oracle(*texts: str) -> Oracle:
    # Evidence in some nodes, Not Fully Supported twice: three rounds, each a new node set.
    return Oracle.from_dict(
        {
            "claims": [
                {
                    "claim": t,
                    "evidence": {"top": [0], "m1": [0], "c1": [0]},
                    "verdicts": ["Not Fully Supported", "Not Fully Supported", "Fully Supported"],
                }
                for t in texts
            ]
        }
    )


def test_read_plans_are_per_run_and_use_the_run_batching() -> None:
    # Moved from tests/method/test_read_plans.py (`evidence.read_plans`, a module-level cache keyed
    # by the sentence index, is gone): each run's context holds its own plans.
    dag = _dag()
    idx = SentenceIndex(dag)
    steps = _oracle().steps()
    cfg = VerifyConfig()
    a = RunContext.create(dag, steps, cfg, sentences=idx)
    b = RunContext.create(dag, steps, cfg, sentences=idx)
    assert a.sentences is b.sentences is idx
    assert a.plans is not b.plans  # the same index, two runs: nothing shared
    other = RunContext.create(dag, steps, VerifyConfig(evidence_sentences_root=1), sentences=idx)
    nodes = {"c0", "c1", "c2", "m1"}
    assert other.plans.plan(nodes).batches == ReadPlan(dag, idx, nodes, other.config).batches
    assert other.plans.plan(nodes).batches != a.plans.plan(nodes).batches
    assert RunContext.create(dag, steps, cfg).sentences is not idx  # a fresh index by default


def test_two_runs_at_once_in_one_process_do_not_share_plans() -> None:
    dag = _dag()
    idx = SentenceIndex(dag)  # even the sentence index is shared: only the plans are per run
    cfg = VerifyConfig(q=3)
    text = "The claim."

    def context() -> RunContext:
        ctx = RunContext.create(dag, _oracle(text).steps(), cfg, sentences=idx)
        return replace(ctx, plans=ReadPlans(dag, idx, cfg, min_nodes=1))  # cache every round

    alone = asyncio.run(verify_claims_in(context(), [Claim("solo", text)]))[0]
    rounds = len(alone.iterations)
    assert rounds == 3

    run_a, run_b = context(), context()

    async def both() -> tuple[list[object], list[object]]:
        got = await asyncio.gather(
            verify_claims_in(run_a, [Claim("a1", text), Claim("a2", text)]),
            verify_claims_in(run_b, [Claim("b1", text)]),
        )
        return got[0], got[1]  # type: ignore[return-value]

    res_a, res_b = asyncio.run(both())
    # Run A's second claim reuses every plan its first claim built; run B builds its own.
    assert run_a.plans.hits == rounds
    assert run_b.plans.hits == 0
    for r in [*res_a, *res_b]:
        assert (r.verdict, r.termination, r.iterations) == (  # type: ignore[attr-defined]
            alone.verdict,
            alone.termination,
            alone.iterations,
        )


def _respond(messages: list[Message]) -> str:
    p = messages[-1].content
    if "Statement to split" in p:
        return '{"parts": ["x"]}'
    if "Evidence:" in p:
        return '{"reasoning": "ok", "verdict": "Fully Supported"}'
    ids = [int(m) for m in re.findall(r"^\[(\d+)\] ", p, re.MULTILINE)]
    return json.dumps({"selected_ids": ids[:1], "context_ids": [], "summary": "s", "missing": ""})


def _root_dag() -> Dag:
    return Dag.from_records(
        [
            {"id": "r1", "text": "The river rose. It rained.", "sources": []},
            {"id": "T", "text": "Final.", "sources": ["r1"]},
        ]
    )


def test_costs_come_from_the_steps_model_without_model_kwarg() -> None:
    dag = _root_dag()
    model = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    (res,) = asyncio.run(verify_claims(dag, [Claim("c", "x")], lm_steps(model), VerifyConfig()))
    assert res.error is None
    per_step = res.cost.per_step
    assert set(per_step) == {Step.DECOMPOSITION, Step.EVIDENCE_SELECTION, Step.VERDICT}
    assert res.cost.lm_calls == 3 == sum(c.lm_calls for c in per_step.values())
    assert res.cost.input_tokens > 0
    # The deprecated second naming of the model gives the same figures (same claim id: the
    # ledger is per claim, so compare with a fresh model).
    again = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning, match="model= is deprecated"):
        (old,) = asyncio.run(
            verify_claims(dag, [Claim("c", "x")], lm_steps(again), VerifyConfig(), model=again)
        )
    assert old.cost.per_step == per_step
    # verify_claim (one claim, its own run) too.
    third = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    one = asyncio.run(
        verify_claim(dag, SentenceIndex(dag), Claim("c", "x"), lm_steps(third), VerifyConfig())
    )
    assert one.cost.per_step == per_step


def test_costs_of_hand_built_and_replaced_steps() -> None:
    dag = _root_dag()

    class Judge:
        async def judge(self, claim, subclaims, evidence, *, sample=0):  # type: ignore[no-untyped-def]
            return VerdictOutcome(Verdict.FULLY_SUPPORTED, "no model")

    # Steps built by hand: each step's own `model` attribute names the ledger.
    model = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    steps = Steps(LMDecomposer(model), LMEvidenceSelector(model), Judge())
    assert steps.ledger_models() == (model,)
    (res,) = asyncio.run(verify_claims(dag, [Claim("c", "x")], steps, VerifyConfig()))
    assert set(res.cost.per_step) == {Step.DECOMPOSITION, Step.EVIDENCE_SELECTION}
    # `replace` of every step keeps the model `lm_steps` recorded (plugins that call it).
    other = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    replaced = replace(lm_steps(other), judge=Judge(), decomposer=Judge(), selector=Judge())
    assert replaced.ledger_models() == (other,)
    # Two models: the claim's cost is the sum over both ledgers.
    m1 = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    m2 = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    mixed = Steps(LMDecomposer(m1), LMEvidenceSelector(m2), lm_steps(m2).judge)
    (res2,) = asyncio.run(verify_claims(dag, [Claim("c", "x")], mixed, VerifyConfig()))
    assert set(res2.cost.per_step) == {Step.DECOMPOSITION, Step.EVIDENCE_SELECTION, Step.VERDICT}
    assert res2.cost.lm_calls == 3
    # The oracle has no model: no costs, as before.
    assert RunContext.create(dag, _oracle().steps(), VerifyConfig()).models == ()


def test_a_fatal_error_of_the_steps_model_stops_the_run_without_model_kwarg() -> None:
    from veritrail.lm.base import EndpointError

    dag = _root_dag()
    model = Model(FakeProvider(responder=_respond))  # type: ignore[arg-type]
    ctx = RunContext.create(dag, lm_steps(model), VerifyConfig())
    assert ctx.fatal_cause() is None
    model.fatal = EndpointError("HTTP 401", endpoint="http://127.0.0.1:9/v1", cause="bad key")
    assert ctx.fatal_cause() == "EndpointError: bad key"
    # ... and a run's claims are then not started (no `stop=`, no `model=`).
    (res,) = asyncio.run(verify_claims(dag, [Claim("c", "x")], lm_steps(model), VerifyConfig()))
    assert res.error == "not started: EndpointError: bad key"
