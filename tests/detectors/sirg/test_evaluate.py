"""Metrics, tau sweep and the cheap baselines of the SIRG evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from veritrail.detectors.sirg.analysis import analyse, coarse_features, random_rows
from veritrail.detectors.sirg.attribution import Method
from veritrail.detectors.sirg.dataset import LabelledRecord
from veritrail.detectors.sirg.detector import DetectorConfig
from veritrail.detectors.sirg.evaluate import compare, fit_logistic, prf, score, sweep_tau
from veritrail.detectors.sirg.models import build_tiny


def test_prf_on_a_known_case() -> None:
    t = np.array([1, 1, 0, 0, 1])
    p = np.array([1, 0, 1, 0, 1])
    assert prf(t, p) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert prf(np.array([0, 0]), np.array([0, 0])) == (0.0, 0.0, 0.0)


def test_bootstrap_interval_brackets_the_point_estimate() -> None:
    rng = np.random.default_rng(1)
    t = rng.integers(0, 2, 200)
    p = np.where(rng.random(200) < 0.8, t, 1 - t)
    s = score(t.tolist(), p.tolist(), n_boot=300)
    for point, (lo, hi) in ((s.precision, s.precision_ci), (s.f1, s.f1_ci)):
        assert lo <= point <= hi and hi - lo < 0.3
    assert s.n == 200 and s.positives == int(t.sum())


def test_tau_sweep_uses_the_share_of_flagged_fragments() -> None:
    y = [1, 0, 1]
    probs = [[0.9, 0.1, 0.1], [0.2], [0.8, 0.7]]  # shares 1/3, 0, 1
    res = sweep_tau(y, probs, taus=(0.0, 0.5), n_boot=20)
    assert res["0"]["predicted_positives"] == 2 and res["0"]["recall"] == 1.0
    assert res["0.5"]["predicted_positives"] == 1 and res["0.5"]["recall"] == 0.5


def test_logistic_baseline_separates_separable_data() -> None:
    x = np.array([[0.0, 1.0], [0.1, 0.9], [1.0, 0.0], [0.9, 0.2]] * 5)
    y = np.array([0, 0, 1, 1] * 5, dtype=float)
    pred = fit_logistic(x, y)(x)
    assert ((pred > 0.5) == (y == 1)).all()


def test_majority_and_coarse_variants_on_tiny_analyses() -> None:
    lm = build_tiny("qwen2")
    recs = [
        LabelledRecord(context="Alice met Bob in Paris.", response="Alice met Bob.", label=0),
        LabelledRecord(
            context="The river flooded.", response="The bridge did not survive.", label=1
        ),
        LabelledRecord(context="Bob signed it.", response="Bob signed the contract.", label=0),
    ]
    an = [
        analyse(lm.model, lm.tokenizer, r.example(), model_name=lm.name, max_targets_per_fragment=2)
        for r in recs
    ]
    feats = coarse_features(an[0])
    assert feats.shape == (10,) and np.isfinite(feats).all()
    rnd = an[0].with_rows(random_rows(an[0], seed=3))
    assert rnd.scores.shape == an[0].scores.shape and not np.allclose(rnd.rows, an[0].rows)
    out = compare(
        recs,
        recs,
        {Method.ATTNLRP: (an, an)},
        config=DetectorConfig(),
        new_classifier=lambda: pytest.fail("no classifier needed"),
        train_kwargs={},
        variants=("majority", "coarse"),
        n_boot=20,
    )
    assert out["variants"]["majority"]["all"]["predicted_positives"] == 0
    assert out["variants"]["coarse"]["p>0.5"]["n"] == 3
    assert out["n_train"] == 3 and out["test_positives"] == 1
    with pytest.raises(ValueError, match="unknown variant"):
        compare(
            recs,
            recs,
            {Method.ATTNLRP: (an, an)},
            config=DetectorConfig(),
            new_classifier=lambda: pytest.fail("unused"),
            train_kwargs={},
            variants=("x",),
        )
