"""Read plans shared by the claims of a run, and the bounded prompt runner (issue 7)."""

from __future__ import annotations

import asyncio

import pytest

from dagkit import make_dag
from veritrail.dag import Dag
from veritrail.method.config import VerifyConfig
from veritrail.method.evidence import batch_items, node_items, run_bounded
from veritrail.method.plans import ReadPlan, ReadPlans
from veritrail.method.segment import SentenceIndex


def _dag() -> Dag:
    # Two stages of non-roots over six chunks; ids chosen so that id order and stage order differ.
    edges = {f"c{i}": [] for i in range(6)}
    edges |= {"m1": ["c0", "c1", "c2"], "a0": ["c3", "c4"], "m0": ["c5", "c0"]}
    edges |= {"top": ["m1", "a0", "c2"], "z": ["m0"]}
    edges["final"] = ["top", "z"]
    return Dag.from_records(make_dag(edges)["nodes"])


def test_plan_matches_the_direct_computation() -> None:
    dag = _dag()
    idx = SentenceIndex(dag)
    cfg = VerifyConfig(evidence_sentences_root=4, evidence_sentences_nonroot=5)
    nodes = {"c2", "m1", "a0", "top", "c0", "z"}
    plan = ReadPlan(dag, idx, nodes, cfg)
    # Later stage first, then id.
    order = sorted(nodes, key=lambda n: (-dag.stage(n), n))
    assert plan.to_read == tuple(order)
    roots = [n for n in order if dag.is_root(n)]
    nonroots = [n for n in order if not dag.is_root(n)]
    assert plan.roots == frozenset(roots) == {"c0", "c2"}
    assert plan.batches == batch_items(node_items(idx, roots), node_items(idx, nonroots), cfg)
    assert plan.batches[0].excerpts[0].is_root  # roots are batched first
    # Lazily, before the set is built: every source of every node (repeats included).
    assert sorted(plan.iter_sources()) == sorted(s for n in order for s in dag.sources(n))
    want = {s for n in nodes for s in dag.sources(n)}
    assert plan.sources() == want
    assert set(plan.iter_sources()) == want


def test_plans_are_cached_per_run_from_a_size_and_bounded() -> None:
    dag = _dag()
    idx = SentenceIndex(dag)
    plans = ReadPlans(dag, idx, VerifyConfig(), min_nodes=2, max_plans=2)
    small = plans.plan({"top"})
    assert plans.plan({"top"}) is not small and plans.hits == 0  # below min_nodes: not cached
    a = plans.plan({"top", "z"})
    assert plans.plan({"z", "top"}) is a and plans.hits == 1
    b = plans.plan({"m0", "m1"})
    c = plans.plan({"c0", "c1"})  # a third plan evicts the least recently used (a)
    assert plans.plan({"m0", "m1"}) is b and plans.plan({"c0", "c1"}) is c
    assert plans.plan({"top", "z"}) is not a


# `test_read_plans_are_per_run_and_per_batching_config` moved to tests/method/test_context.py:
# a run's plans are held by its `RunContext` (no module-level cache keyed by the sentence index).


async def test_run_bounded_keeps_order_and_the_limit() -> None:
    running = 0
    peak = 0

    async def work(x: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (x % 3))
        running -= 1
        return x * x

    items = list(range(40))
    assert await run_bounded(work, items, 4) == [x * x for x in items]
    assert peak == 4
    peak = 0
    assert await run_bounded(work, items, None) == [x * x for x in items]
    assert peak == 40


async def test_run_bounded_stops_starting_work_after_a_failure() -> None:
    started: list[int] = []

    async def work(x: int) -> int:
        started.append(x)
        await asyncio.sleep(0)
        if x == 2:
            raise ValueError("unreadable reply")
        return x

    with pytest.raises(ValueError, match="unreadable"):
        await run_bounded(work, list(range(100)), 3)
    assert len(started) < 10  # the other workers stop taking items
