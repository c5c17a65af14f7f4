"""Provenance paths: the same answer as the original enumeration, in linear time and bounded work."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail import Claim, VerifyConfig
from veritrail.dag import Dag
from veritrail.method.loop import verify_claim
from veritrail.method.oracle import Oracle
from veritrail.method.segment import SentenceIndex
from veritrail.method.traceability import PROVENANCE_TRUNCATED, find_provenance, provenance
from veritrail.records import Iteration, Verdict


def reference_provenance(
    dag: Dag, iterations: Sequence[Iteration], max_paths: int
) -> tuple[tuple[str, ...], ...]:
    """The original implementation (copies the path at every step), kept as the reference."""
    ev: set[str] = set()
    for it in iterations:
        ev.update(it.nodes_with_evidence)
    starts = sorted(n for n in dag.sources(dag.terminal) if n in ev)
    full: list[tuple[str, ...]] = []
    partial: list[tuple[str, ...]] = []
    stack: list[tuple[str, ...]] = [(s,) for s in reversed(starts)]
    while stack and len(full) < max_paths:
        path = stack.pop()
        nxt = [s for s in dag.sources(path[-1]) if s in ev and s not in path]
        if not nxt:
            (full if dag.is_root(path[-1]) else partial).append(path)
            continue
        stack.extend((*path, s) for s in sorted(nxt, reverse=True))
    return tuple(full) if full else tuple(partial[:max_paths])


def _iteration(i: int, with_ev: Sequence[str]) -> Iteration:
    return Iteration(
        i, (), (), tuple(with_ev), (), (), (), Verdict.FULLY_SUPPORTED, "", verdict_called_lm=True
    )


def _dag(sources: dict[str, list[str]]) -> Dag:
    return Dag.from_records(
        [{"id": n, "text": f"Node {n} says so.", "sources": s} for n, s in sources.items()]
    )


@st.composite
def dags_with_evidence(draw: st.DrawFn) -> tuple[Dag, list[list[str]], int]:
    n = draw(st.integers(2, 14))
    names = [f"v{i:02d}" for i in range(n)]
    sources: dict[str, list[str]] = {}
    for j, name in enumerate(names[:-1]):
        sources[name] = sorted(
            draw(st.sets(st.sampled_from(names[:j]), max_size=3)) if j else set()
        )
    # Every node that feeds nothing feeds the terminal, so the terminal is the only sink.
    fed = {s for srcs in sources.values() for s in srcs}
    extra = draw(st.sets(st.sampled_from(names[:-1]), max_size=3))
    sources[names[-1]] = sorted({x for x in names[:-1] if x not in fed} | extra)
    ev = draw(st.sets(st.sampled_from(names[:-1])))
    # Spread the evidence over one to three iterations (provenance takes their union).
    cut = sorted(draw(st.lists(st.integers(0, len(ev)), max_size=2)))
    evl = sorted(ev)
    parts = [evl[a:b] for a, b in zip([0, *cut], [*cut, len(evl)], strict=True)]
    return _dag(sources), parts, draw(st.integers(1, 6))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(case=dags_with_evidence())
def test_same_paths_as_the_original_enumeration(case: tuple[Dag, list[list[str]], int]) -> None:
    dag, parts, max_paths = case
    its = [_iteration(i, p) for i, p in enumerate(parts, 1)]
    found = find_provenance(dag, its, max_paths)
    assert found.paths == reference_provenance(dag, its, max_paths)
    assert provenance(dag, its, max_paths) == found.paths
    assert found.paths == reference_provenance(dag, its, 10_000) or found.truncated
    if found.truncated:
        assert len(reference_provenance(dag, its, 10_000)) > len(found.paths)


def test_a_long_chain_gives_one_path_of_the_right_length() -> None:
    n = 2_000
    sources = {"n0": []} | {f"n{i}": [f"n{i - 1}"] for i in range(1, n)}
    dag = _dag(sources)
    its = [_iteration(1, [f"n{i}" for i in range(n - 1)])]
    found = find_provenance(dag, its)
    assert len(found.paths) == 1 and len(found.paths[0]) == n - 1
    assert found.paths[0][0] == f"n{n - 2}" and found.paths[0][-1] == "n0"
    assert not found.truncated and found.steps == 2 * (n - 1)


def _layered(layers: int, width: int) -> Dag:
    """`layers` layers of `width` nodes, each node fed by every node of the layer below."""
    sources: dict[str, list[str]] = {}
    for k in range(layers):
        for j in range(width):
            sources[f"L{k:02d}n{j:02d}"] = (
                [f"L{k - 1:02d}n{i:02d}" for i in range(width)] if k else []
            )
    sources["T"] = [f"L{layers - 1:02d}n{i:02d}" for i in range(width)]
    return _dag(sources)


def test_a_layered_dag_with_evidence_everywhere_but_the_roots_is_bounded() -> None:
    # 30 layers x 30 nodes: 30**29 partial paths. The walk must stop after max_paths of them.
    layers, width, max_paths = 30, 30, 1000
    dag = _layered(layers, width)
    ev = [n.id for n in dag if n.id != "T" and not dag.is_root(n.id)]
    its = [_iteration(1, ev)]
    found = find_provenance(dag, its, max_paths)
    assert len(found.paths) == max_paths and found.truncated and not found.budget_hit
    assert all(len(p) == layers - 1 for p in found.paths)  # down to the layer above the roots
    # Work: each path adds at most its length in pushes plus its length in copying.
    assert found.steps <= max_paths * 2 * (layers - 1)
    issue = found.issue()
    assert issue is not None and issue.kind == PROVENANCE_TRUNCATED
    # With evidence in the roots too, the paths reach them; still at most max_paths.
    full = find_provenance(dag, [_iteration(1, [n.id for n in dag if n.id != "T"])], 50)
    assert len(full.paths) == 50 and all(dag.is_root(p[-1]) for p in full.paths)
    assert full.steps <= 50 * 2 * layers


def test_the_step_budget_stops_the_walk_and_says_so() -> None:
    dag = _layered(12, 12)
    ev = [n.id for n in dag if n.id != "T"]
    found = find_provenance(dag, [_iteration(1, ev)], 1000, step_budget=500)
    assert found.budget_hit and found.truncated and 0 < len(found.paths) < 1000
    assert found.steps <= 500 + 2 * 12
    issue = found.issue()
    assert issue is not None and "steps" in issue.detail


def test_a_cut_provenance_is_an_issue_on_the_claim() -> None:
    # 6 layers x 5 nodes with evidence everywhere: 5**6 = 15,625 root paths, 1,000 reported.
    dag = _layered(6, 5)
    claim = "Every layer agrees."
    oracle = Oracle.from_dict(
        {
            "claims": [
                {
                    "claim": claim,
                    "evidence": {n.id: [0] for n in dag if n.id != "T"},
                    "verdicts": ["Fully Supported"],
                }
            ]
        }
    )
    res = asyncio.run(
        verify_claim(dag, SentenceIndex(dag), Claim("c1", claim), oracle.steps(), VerifyConfig())
    )
    assert res.verdict is Verdict.FULLY_SUPPORTED and len(res.provenance) == 1000
    assert [i.kind for i in res.issues] == [PROVENANCE_TRUNCATED]
