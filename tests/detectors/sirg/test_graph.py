"""Graph construction on synthetic score matrices."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from veritrail.detectors.sirg.fragments import FragmentKind
from veritrail.detectors.sirg.graph import (
    EdgeSelection,
    adaptive_cut,
    build_graph,
    graph_from_dict,
    graph_to_dict,
    linearise,
    select_sources,
)

C, Q, R = FragmentKind.CONTEXT, FragmentKind.QUERY, FragmentKind.RESPONSE


def _matrix() -> tuple[list[FragmentKind], list[str], np.ndarray]:
    kinds = [C, C, C, C, Q, R, R]
    texts = [f"t{i}" for i in range(7)]
    s = np.full((7, 7), np.nan)
    s[5, :5] = [0.9, 0.1, 0.85, 0.05, 0.2]
    s[6, :6] = [0.3, -0.2, 0.1, 0.0, 0.05, 0.6]
    return kinds, texts, s


def test_top_k_keeps_the_k_strongest_sources_with_normalised_weights() -> None:
    kinds, texts, s = _matrix()
    g = build_graph(kinds, texts, s, selection=EdgeSelection.TOP_K, k=3)
    e5 = g.incoming(5)
    assert [e.source for e in e5] == [0, 2, 4]
    assert sum(e.weight for e in e5) == pytest.approx(1.0)
    assert e5[0].weight == pytest.approx(0.9 / 1.95)
    e6 = g.incoming(6)
    assert [e.source for e in e6] == [5, 0, 2]  # earlier response fragments are sources too
    assert all(e.target in (5, 6) for e in g.edges)  # only response fragments get edges


def test_k_larger_than_sources_keeps_all_and_negative_scores_weigh_nothing() -> None:
    kinds, texts, s = _matrix()
    g = build_graph(kinds, texts, s, k=15)
    e6 = g.incoming(6)
    assert len(e6) == 6
    neg = next(e for e in e6 if e.source == 1)
    assert neg.score == pytest.approx(-0.2) and neg.weight == 0.0


def test_adaptive_cuts_at_the_largest_drop() -> None:
    kinds, texts, s = _matrix()
    g = build_graph(kinds, texts, s, selection=EdgeSelection.ADAPTIVE)
    # Row 5 sorted: .9 .85 | .2 .1 .05 -> largest drop after the second.
    assert [e.source for e in g.incoming(5)] == [0, 2]
    # Row 6 sorted: .6 | .3 .1 .05 0 -.2 -> largest drop after the first.
    assert [e.source for e in g.incoming(6)] == [5]
    assert g.k is None
    assert adaptive_cut([]) == 0 and adaptive_cut([0.4]) == 1


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=30))
def test_adaptive_cut_is_at_a_maximal_drop(scores: list[float]) -> None:
    s = sorted(scores, reverse=True)
    keep = adaptive_cut(s)
    assert 1 <= keep <= len(s)
    if len(s) > 1:
        drops = [a - b for a, b in itertools.pairwise(s)]
        assert s[keep - 1] - s[keep] == max(drops)


@given(
    st.lists(st.one_of(st.just(math.nan), st.floats(-3, 3, allow_nan=False)), max_size=25),
    st.integers(1, 20),
)
def test_top_k_selection_properties(scores: list[float], k: int) -> None:
    kept = select_sources(scores, EdgeSelection.TOP_K, k)
    valid = [i for i, x in enumerate(scores) if not math.isnan(x)]
    assert len(kept) == min(k, len(valid))
    assert set(kept) <= set(valid)
    vals = [scores[i] for i in kept]
    assert vals == sorted(vals, reverse=True)
    if kept:
        assert all(scores[i] <= vals[-1] for i in set(valid) - set(kept))


def test_bad_inputs_are_rejected() -> None:
    kinds, texts, s = _matrix()
    with pytest.raises(ValueError, match="score matrix"):
        build_graph(kinds[:-1], texts, s)
    with pytest.raises(ValueError, match="k must"):
        build_graph(kinds, texts, s, k=0)


def test_json_round_trip_and_linearisation() -> None:
    kinds, texts, s = _matrix()
    g = build_graph(kinds, texts, s, k=2)
    d = graph_to_dict(g)
    back = graph_from_dict(json.loads(json.dumps(d)))
    assert back.nodes == g.nodes
    assert [(e.source, e.target) for e in back.edges] == [(e.source, e.target) for e in g.edges]
    assert d["selection"] == "top_k" and d["k"] == 2
    assert linearise(g, 5) == "[context 0.51] t0\n[context 0.49] t2"
    with pytest.raises(ValueError, match="version"):
        graph_from_dict({**d, "version": 99})
