"""Property tests on random DAGs: computed stages, round trips, and corruptions caught by code."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veritrail.dag import Dag, DagValidationError, ProblemCode, load_dag, save_dag

Records = list[dict[str, Any]]


@st.composite
def valid_dags(draw: st.DrawFn, min_nodes: int = 1) -> Records:
    """A random valid DAG in shuffled file order: node k reads a subset of nodes < k, and the
    last node reads every node nothing else reads (so it is the only terminal)."""
    n = draw(st.integers(min_value=min_nodes, max_value=25))
    ids = [f"n{k}" for k in range(n)]
    recs: Records = []
    used: set[str] = set()
    for k in range(n - 1):
        srcs = draw(st.lists(st.sampled_from(ids[:k]), unique=True, max_size=4)) if k else []
        used.update(srcs)
        text = draw(st.text(min_size=1, max_size=30).filter(lambda t: bool(t.strip())))
        recs.append({"id": ids[k], "text": text, "sources": srcs})
    last = [i for i in ids[:-1] if i not in used]
    recs.append({"id": ids[-1], "text": "Final output.", "sources": last})
    order = draw(st.permutations(range(n)))
    return [recs[i] for i in order]


def _longest_path_stage(recs: Records) -> dict[str, int]:
    by_id = {r["id"]: r for r in recs}
    memo: dict[str, int] = {}

    def stage(i: str) -> int:
        if i not in memo:
            memo[i] = 1 + max((stage(s) for s in by_id[i]["sources"]), default=0)
        return memo[i]

    return {i: stage(i) for i in by_id}


@given(valid_dags())
def test_computed_stages(recs: Records) -> None:
    g = Dag.from_records(recs)
    assert {n.id: n.stage for n in g} == _longest_path_stage(recs)
    for n in g:
        for s in n.sources:
            assert g.stage(s) < n.stage  # computed stages strictly grow along an edge
        if g.is_root(n.id):
            assert n.stage == 1
    assert g.stage(g.terminal) == max(n.stage for n in g)
    assert g.terminal == f"n{len(recs) - 1}"
    assert sum(len(g.children(n.id)) for n in g) == g.edges


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60, deadline=None
)
@given(
    recs=valid_dags(),
    suffix=st.sampled_from([".json", ".jsonl"]),
    meta=st.dictionaries(st.text(max_size=5), st.integers()),
)
def test_round_trip(tmp_path: Path, recs: Records, suffix: str, meta: dict[str, int]) -> None:
    g = Dag.from_records(recs, meta)
    p = tmp_path / f"dag{suffix}"
    save_dag(g, p)
    h = load_dag(p)
    assert h.to_records() == g.to_records()
    assert h.meta == g.meta
    assert h.terminal == g.terminal
    assert h.roots == g.roots


def _corrupt(recs: Records, kind: str, rnd: random.Random) -> tuple[Records, str]:
    """Apply one corruption; return the records and the id that must appear in the problem."""
    recs = copy.deepcopy(recs)
    by_id = {r["id"]: r for r in recs}
    g = Dag.from_records(recs)
    nonroots = sorted(n.id for n in g if n.sources)
    victim = rnd.choice(sorted(set(by_id) - {g.terminal}))
    if kind == ProblemCode.DUPLICATE_ID:
        recs.append(dict(by_id[victim]))
        return recs, victim
    if kind == ProblemCode.UNKNOWN_SOURCE:
        by_id[victim]["sources"].append("ghost")
        return recs, f"{victim}<-ghost"
    if kind == ProblemCode.EMPTY_TEXT:
        by_id[victim]["text"] = rnd.choice(["", " ", "\n\t"])
        return recs, victim
    if kind == ProblemCode.MALFORMED_NODE:
        by_id[victim]["text"] = rnd.choice([None, 3, ["x"]])
        return recs, victim
    if kind == ProblemCode.CYCLE:
        v = rnd.choice(nonroots)
        u = rnd.choice(by_id[v]["sources"])
        by_id[u]["sources"].append(v)  # u -> v and now v -> u
        return recs, v
    if kind == ProblemCode.SEVERAL_TERMINALS:
        recs.append({"id": "extra", "text": "Another ending.", "sources": [victim]})
        return recs, "extra"
    if kind == ProblemCode.NO_TERMINAL:
        root = sorted(g.roots)[0]
        by_id[root]["sources"].append(g.terminal)  # the only sink now has a child
        return recs, ""
    if kind == ProblemCode.STAGE_DECREASES:
        for r in recs:
            r["stage"] = g.stage(r["id"])
        v = rnd.choice(nonroots)
        u = rnd.choice(by_id[v]["sources"])
        by_id[u]["stage"] = by_id[v]["stage"] + 1
        return recs, f"{v}<-{u}"
    raise AssertionError(kind)


KINDS = [
    ProblemCode.DUPLICATE_ID,
    ProblemCode.UNKNOWN_SOURCE,
    ProblemCode.EMPTY_TEXT,
    ProblemCode.MALFORMED_NODE,
    ProblemCode.CYCLE,
    ProblemCode.SEVERAL_TERMINALS,
    ProblemCode.NO_TERMINAL,
    ProblemCode.STAGE_DECREASES,
]


@pytest.mark.parametrize("kind", KINDS, ids=str)
@settings(max_examples=40, deadline=None)  # x 8 kinds
@given(recs=valid_dags(min_nodes=2), seed=st.integers(0, 2**16))
def test_corruption_is_rejected_with_its_code(kind: ProblemCode, recs: Records, seed: int) -> None:
    bad, culprit = _corrupt(recs, kind, random.Random(seed))
    with pytest.raises(DagValidationError) as ei:
        Dag.from_records(bad)
    hits = [p for p in ei.value.problems if p.code == kind]
    assert hits, ei.value
    if culprit:
        assert any(culprit in p.ids for p in hits), ei.value
    if kind == ProblemCode.CYCLE:
        # The reported cycle is a real one: each id is a source of the next, the last of the first.
        srcs = {r["id"]: set(r["sources"]) for r in bad}
        for p in hits:
            cyc = list(p.ids)
            for a, b in zip(cyc, cyc[1:] + cyc[:1], strict=True):
                assert a in srcs[b]
