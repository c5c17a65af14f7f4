"""Fragments and substantive units on fixed sentences (offline spaCy model)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("spacy")

import itertools

from veritrail.detectors.sirg.fragments import (
    Fragment,
    FragmentKind,
    TokenizedFragment,
    UnitKind,
    fragment_scores,
    place_fragments,
    split_fragments,
    target_positions,
)

TEXT = (
    "The river flooded the village in March. Nobody was hurt, but the bridge did not survive.\n"
    "Alice met Bob in Paris on Monday.\n"
    "The old wooden door never opened."
)


def _units(f: Fragment) -> dict[str, UnitKind]:
    return {u.text: u.kind for u in f.units}


def test_lines_then_sentences_with_offsets() -> None:
    frags = split_fragments(TEXT)
    assert [f.text for f in frags] == [
        "The river flooded the village in March.",
        "Nobody was hurt, but the bridge did not survive.",
        "Alice met Bob in Paris on Monday.",
        "The old wooden door never opened.",
    ]
    for f in frags:
        assert TEXT[f.start : f.end] == f.text
        for u in f.units:
            assert TEXT[u.start : u.end] == u.text
            assert f.start <= u.start < u.end <= f.end


def test_nouns_verbs_negations_entities_phrases() -> None:
    first, second, third, fourth = split_fragments(TEXT, FragmentKind.RESPONSE)
    assert first.kind is FragmentKind.RESPONSE
    assert _units(first) == {
        "river": UnitKind.NOUN,
        "flooded": UnitKind.VERB,
        "village": UnitKind.NOUN,
        "March": UnitKind.ENTITY,
    }
    u2 = _units(second)
    assert u2["not"] is UnitKind.NEGATION and u2["Nobody"] is UnitKind.NEGATION
    assert u2["bridge"] is UnitKind.NOUN and u2["survive"] is UnitKind.VERB
    assert "the" not in u2 and "did" not in u2  # linking words are not substantive
    u3 = _units(third)
    for name in ("Alice", "Bob", "Paris", "Monday"):
        assert u3[name] is UnitKind.ENTITY
    assert u3["met"] is UnitKind.VERB
    u4 = _units(fourth)
    assert u4["old wooden door"] is UnitKind.NOUN_PHRASE  # determiner stripped
    assert u4["never"] is UnitKind.NEGATION


def test_units_never_overlap() -> None:
    for f in split_fragments("The French president Emmanuel Macron did not visit New York City."):
        spans = sorted((u.start, u.end) for u in f.units)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
        assert any(u.kind is UnitKind.ENTITY and "Macron" in u.text for u in f.units)


def _frag(kind: FragmentKind, start: int, end: int) -> Fragment:
    return Fragment(kind=kind, start=start, end=end, text="x" * (end - start), units=())


def test_placement_falls_back_to_all_tokens_without_units() -> None:
    offsets = [(0, 2), (2, 5), (5, 9), (9, 12)]
    (tf,) = place_fragments([_frag(FragmentKind.CONTEXT, 1, 6)], 0, offsets)
    assert tf.tokens == (0, 1, 2)
    assert tf.units == ((0,), (1,), (2,))


def test_score_is_mean_over_target_units_of_max_over_source_units() -> None:
    # Tokens 0-3 context (two units: (0,1) and (3,)), 4-5 context (unit (4,)),
    # response tokens 6-8 with units (6,) and (7, 8).
    ctx_a = TokenizedFragment(_frag(FragmentKind.CONTEXT, 0, 4), (0, 1, 2, 3), ((0, 1), (3,)))
    ctx_b = TokenizedFragment(_frag(FragmentKind.CONTEXT, 4, 6), (4, 5), ((4,),))
    resp = TokenizedFragment(_frag(FragmentKind.RESPONSE, 6, 9), (6, 7, 8), ((6,), (7, 8)))
    targets = [6, 7, 8]
    rows = np.zeros((3, 9))
    rows[0, :6] = [1, 3, 0, 2, 0, 0]  # token 6
    rows[1, :7] = [0, 0, 9, 0, 4, 0, 0]  # token 7
    rows[2, :8] = [2, 2, 0, 0, 2, 0, 0, 0]  # token 8
    s = fragment_scores([ctx_a, ctx_b, resp], rows, targets)
    vec = (rows[0] + (rows[1] + rows[2]) / 2) / 2  # unit means, then mean over units
    assert s[2, 0] == pytest.approx(max(vec[[0, 1]].mean(), vec[3]))
    assert s[2, 1] == pytest.approx(vec[4])
    assert np.isnan(s[2, 2]) and np.isnan(s[0]).all() and np.isnan(s[1]).all()


def test_target_positions_cap() -> None:
    resp = TokenizedFragment(
        _frag(FragmentKind.RESPONSE, 0, 9), tuple(range(10)), tuple((i,) for i in range(10))
    )
    assert target_positions([resp]) == list(range(1, 10))  # position 0 has no prefix
    capped = target_positions([resp], max_per_fragment=3)
    assert capped == [4, 9]  # 0, 4/5, 9 spread; 0 dropped
