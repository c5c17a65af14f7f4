"""Metrics against hand-computed values and scikit-learn / scipy on fixed inputs."""

from __future__ import annotations

import math
import random
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.stats import spearmanr
from sklearn.metrics import (
    balanced_accuracy_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from veritrail.eval.metrics import (
    FS,
    NFS,
    auroc,
    error_stage_rates,
    evidence_scores,
    exclude_claims,
    hard_metrics,
    jensen_shannon,
    pooled_stage_rates,
    spearman,
    stage_agreement,
)
from veritrail.records import Verdict

INC = Verdict.INCONCLUSIVE


def _sk(gold: list[Verdict], pred: list[Verdict]) -> dict[str, float]:
    g = [v.value for v in gold]
    p = [v.value for v in pred]
    labels = [FS.value, NFS.value]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns on zero divisions and missing classes
        return {
            "macro_f1": f1_score(g, p, labels=labels, average="macro", zero_division=0),
            "bal": balanced_accuracy_score(g, p),
            "p_fs": precision_score(g, p, pos_label=FS.value, zero_division=0),
            "r_fs": recall_score(g, p, pos_label=FS.value, zero_division=0),
            "p_nfs": precision_score(g, p, pos_label=NFS.value, zero_division=0),
            "r_nfs": recall_score(g, p, pos_label=NFS.value, zero_division=0),
        }


def _ours(gold: list[Verdict], pred: list[Verdict]) -> dict[str, float]:
    m = hard_metrics(gold, pred)
    assert m.fs is not None and m.nfs is not None
    assert m.macro_f1 is not None and m.balanced_accuracy is not None
    return {
        "macro_f1": m.macro_f1,
        "bal": m.balanced_accuracy,
        "p_fs": m.fs.precision,
        "r_fs": m.fs.recall,
        "p_nfs": m.nfs.precision,
        "r_nfs": m.nfs.recall,
    }


def test_hard_metrics_hand_computed() -> None:
    # gold: 4 FS, 2 NFS. pred: FS FS FS NFS | FS NFS
    gold = [FS, FS, FS, FS, NFS, NFS]
    pred = [FS, FS, FS, NFS, FS, NFS]
    m = hard_metrics(gold, pred)
    assert m.n == 6
    assert m.fs is not None and m.nfs is not None
    # FS: tp=3, predicted 4, gold 4 -> P=0.75, R=0.75, F1=0.75
    assert m.fs.precision == pytest.approx(0.75)
    assert m.fs.recall == pytest.approx(0.75)
    assert m.fs.f1 == pytest.approx(0.75)
    # NFS: tp=1, predicted 2, gold 2 -> P=0.5, R=0.5, F1=0.5
    assert m.nfs.precision == pytest.approx(0.5)
    assert m.nfs.recall == pytest.approx(0.5)
    assert m.macro_f1 == pytest.approx(0.625)
    assert m.balanced_accuracy == pytest.approx(0.625)
    assert m.accuracy == pytest.approx(4 / 6)
    assert m.fs.support == 4 and m.nfs.support == 2


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ([FS, FS, NFS, NFS, NFS, FS, NFS], [FS, NFS, NFS, FS, NFS, FS, NFS]),
        ([FS, FS, FS], [FS, NFS, FS]),  # NFS missing from gold
        ([NFS, NFS, NFS, NFS], [NFS, NFS, NFS, NFS]),  # FS missing everywhere
        ([FS, NFS], [NFS, FS]),  # all wrong
        ([FS, FS, NFS], [FS, FS, FS]),  # a class never predicted
    ],
)
def test_hard_metrics_match_sklearn(gold: list[Verdict], pred: list[Verdict]) -> None:
    ours, theirs = _ours(gold, pred), _sk(gold, pred)
    for k in theirs:
        assert ours[k] == pytest.approx(theirs[k]), k


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40))
@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_hard_metrics_match_sklearn_random(pairs: list[tuple[bool, bool]]) -> None:
    gold = [FS if g else NFS for g, _ in pairs]
    pred = [FS if p else NFS for _, p in pairs]
    ours, theirs = _ours(gold, pred), _sk(gold, pred)
    for k in theirs:
        assert ours[k] == pytest.approx(theirs[k]), k


def test_hard_metrics_empty_and_bad_labels() -> None:
    m = hard_metrics([], [])
    assert m.n == 0 and m.macro_f1 is None and m.balanced_accuracy is None and m.fs is None
    with pytest.raises(ValueError, match="FS/NFS"):
        hard_metrics([FS], [INC])
    with pytest.raises(ValueError, match="length"):
        hard_metrics([FS], [])


def test_exclusion_counts_any_method_inconclusive_or_missing() -> None:
    gold = {"a": FS, "b": NFS, "c": FS, "d": NFS, "e": INC}
    preds = {
        "m1": {"a": FS, "b": INC, "c": FS, "d": NFS, "e": FS},
        "m2": {"a": NFS, "b": NFS, "c": None, "d": NFS, "e": FS},
    }
    ex = exclude_claims(gold, preds)
    assert ex.kept == ("a", "d")
    assert ex.inconclusive == ("b",)
    assert ex.no_verdict == ("c",)
    assert ex.gold_not_binary == ("e",)


def test_all_inconclusive_leaves_nothing_to_score() -> None:
    gold = {"a": FS, "b": NFS}
    ex = exclude_claims(gold, {"m": {"a": INC, "b": INC}})
    assert ex.kept == () and len(ex.inconclusive) == 2
    m = hard_metrics([gold[k] for k in ex.kept], [])
    assert m.n == 0 and m.macro_f1 is None


def test_auroc_hand_computed_and_sklearn() -> None:
    labels = [True, True, False, False]
    scores = [0.9, 0.4, 0.4, 0.1]
    # pairs (pos, neg): (0.9,0.4)=1 (0.9,0.1)=1 (0.4,0.4)=0.5 (0.4,0.1)=1 -> 3.5/4
    assert auroc(labels, scores) == pytest.approx(0.875)
    rng = random.Random(7)
    for _ in range(20):
        n = rng.randint(2, 30)
        ys = [rng.random() < 0.5 for _ in range(n)]
        if all(ys) or not any(ys):
            ys[0] = not ys[0]
        ss = [rng.choice([0, 1 / 3, 2 / 3, 1]) for _ in range(n)]  # soft scores of k=3 samples
        assert auroc(ys, ss) == pytest.approx(roc_auc_score(ys, ss))


def test_auroc_one_class_missing() -> None:
    assert auroc([True, True], [0.2, 0.9]) is None
    assert auroc([], []) is None


def test_evidence_scores_alternative_gold_sets() -> None:
    g1 = frozenset({("c0", 1), ("c0", 2), ("c1", 0)})
    g2 = frozenset({("c0", 5)})
    # Selection covers g2 fully and one sentence of g1, plus one wrong sentence.
    e = evidence_scores({("c0", 5), ("c0", 1), ("c2", 3)}, [g1, g2])
    assert e is not None
    assert e.recall == 1.0 and e.best_set == 1
    assert e.precision == pytest.approx(2 / 3)  # c0#5 and c0#1 are in some gold set
    e2 = evidence_scores({("c0", 1), ("c0", 2)}, [g1, g2])
    assert e2 is not None and e2.recall == pytest.approx(2 / 3) and e2.precision == 1.0
    nothing = evidence_scores(set(), [g1])
    assert nothing is not None and nothing.recall == 0.0 and nothing.precision is None
    assert evidence_scores({("c0", 1)}, []) is None
    assert evidence_scores({("c0", 1)}, [frozenset()]) is None


def test_error_stage_rates_and_pooled_weighting() -> None:
    # variant A: 4 TPs, stage 2 named by 1, stage 3 by 3 (one claim names both 2 and 3)
    a = {"x1": (3,), "x2": (3,), "x3": (2, 3), "x4": (4,)}
    b = {"x1": (2,), "x5": (3,)}
    ra = error_stage_rates(list(a.values()))
    assert ra == {2: 0.25, 3: 0.75, 4: 0.25}
    pooled = pooled_stage_rates({"a": a, "b": b}, iterations=200, seed=1)
    by = {r.stage: r for r in pooled}
    # weighted mean with n_a=4, n_b=2: stage 2: (4*0.25 + 2*0.5)/6 = 2/6
    assert by[2].rate == pytest.approx(2 / 6)
    assert by[3].rate == pytest.approx((4 * 0.75 + 2 * 0.5) / 6)
    assert by[4].rate == pytest.approx(1 / 6)
    for r in pooled:
        assert 0.0 <= r.low <= r.rate <= r.high <= 1.0
    again = pooled_stage_rates({"a": a, "b": b}, iterations=200, seed=1)
    assert again == pooled  # seeded


def test_pooled_rates_single_stage_has_degenerate_ci() -> None:
    rates = pooled_stage_rates({"m": {"k1": (2,), "k2": (2,)}}, iterations=50)
    assert len(rates) == 1 and rates[0].rate == rates[0].low == rates[0].high == 1.0
    assert pooled_stage_rates({"m": {}}) == []


def test_jensen_shannon_against_scipy() -> None:
    p = {2: 0.2, 3: 0.5, 4: 0.3}
    q = {2: 0.1, 3: 0.2, 4: 0.4, 5: 0.3}
    keys = [2, 3, 4, 5]
    pv = [p.get(k, 0.0) for k in keys]
    qv = [q.get(k, 0.0) for k in keys]
    expected = jensenshannon(pv, qv, base=2) ** 2  # scipy returns the distance (square root)
    assert jensen_shannon(p, q) == pytest.approx(expected)
    assert jensen_shannon(p, p) == pytest.approx(0.0)
    assert jensen_shannon({1: 1.0}, {2: 1.0}) == pytest.approx(1.0)  # disjoint -> maximum
    assert jensen_shannon({}, q) is None
    # Rates that sum past 1 (several stages per claim) are normalised first.
    assert jensen_shannon({2: 0.5, 3: 1.0}, {2: 1 / 3, 3: 2 / 3}) == pytest.approx(0.0)


def test_spearman_against_scipy() -> None:
    rng = random.Random(3)
    for _ in range(20):
        n = rng.randint(3, 8)
        x = [rng.choice([0.0, 0.1, 0.2, 0.5]) for _ in range(n)]
        y = [rng.random() for _ in range(n)]
        ours = spearman(x, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns when x is constant
            theirs = spearmanr(x, y).statistic
        if math.isnan(theirs):
            assert ours is None
        else:
            assert ours == pytest.approx(theirs)
    assert spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert spearman([1.0], [2.0]) is None
    assert spearman([1.0, 1.0], [1.0, 2.0]) is None


def test_stage_agreement_over_union_of_stages() -> None:
    js, sp = stage_agreement({2: 0.2, 3: 0.8}, {3: 0.6, 4: 0.4})
    assert js is not None and 0 < js < 1
    # ranks over stages 2,3,4: (0.2, 0.8, 0) vs (0, 0.6, 0.4)
    assert sp == pytest.approx(spearmanr([0.2, 0.8, 0.0], [0.0, 0.6, 0.4]).statistic)
