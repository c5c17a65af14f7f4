"""The shipped samples run keyless through the CLI: examples/trace (from-trace) and examples/eval.

`--model demo/overlap` (the word-overlap demonstration model, in-process) answers; the docs run the
same commands (docs/adapters.md, docs/evaluation.md, through scripts/check_docs.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.method.segment import split_sentences

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _invoke(args: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.chdir(tmp_path)  # nothing written into the checkout
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VERITRAIL_CACHE", "0")
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_sample_trace_becomes_a_dag_and_its_planted_error_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = EXAMPLES / "trace" / "rag.otlp.json"
    res = _invoke(
        ["from-trace", str(trace), "--out", "dag.json", "--explain"], monkeypatch, tmp_path
    )
    assert res.exit_code == 0, res.output
    assert "doc-3" in res.output  # the passage nothing read, listed by --explain
    dag = json.loads((tmp_path / "dag.json").read_text(encoding="utf-8"))
    nodes = {n["id"]: n for n in dag["nodes"]}
    assert set(nodes) == {"input-1", "doc-1", "doc-2", "gen-1", "gen-2", "gen-3"}
    assert nodes["gen-2"]["sources"] == ["doc-2"]
    assert "five years" in nodes["gen-2"]["text"]  # the planted error, in the warranty notes
    assert sorted(nodes["gen-3"]["sources"]) == ["gen-1", "gen-2", "input-1"]

    claims = EXAMPLES / "trace" / "claims.json"
    args = ["verify", "dag.json", "--claims", str(claims), "--model", "demo/overlap"]
    res = _invoke([*args, "--out", "report.json", "--html", "report.html"], monkeypatch, tmp_path)
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    verdicts = {c["id"]: c["verdict"] for c in report["claims"]}
    assert verdicts == {
        "c1": "Fully Supported",
        "c2": "Fully Supported",
        "c3": "Fully Supported",
        "c4": "Not Fully Supported",
    }
    (c4,) = (c for c in report["claims"] if c["id"] == "c4")
    assert c4["error_stages"] == [2]
    assert "(error stage 2, node gen-2)" in res.output
    assert report["model_label"] == "demonstration, not a judge"


def test_sample_eval_dataset_is_well_formed() -> None:
    doc = json.loads((EXAMPLES / "eval" / "towns.json").read_text(encoding="utf-8"))
    assert (doc["format"], doc["version"]) == ("veritrail-eval", 1)
    assert len(doc["items"]) == 12
    labels = [c["label"] for item in doc["items"] for c in item["claims"]]
    assert (labels.count("Fully Supported"), labels.count("Not Fully Supported")) == (17, 7)
    for item in doc["items"]:
        texts = {n["id"]: n["text"] for n in item["dag"]["nodes"]}
        for claim in item["claims"]:
            gold = claim.get("gold_evidence")
            assert (gold is None) == (claim["label"] == "Not Fully Supported")
            for alternative in gold or []:
                for ref in alternative:
                    count = len(split_sentences(texts[ref["node"]]))
                    assert all(0 <= i < count for i in ref["sentences"]), (item["id"], ref)


def test_sample_eval_dataset_runs_keyless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy", reason="veritrail eval needs the eval extra")
    args = [
        "eval", str(EXAMPLES / "eval" / "towns.json"), "--model", "demo/overlap",
        "--method", "veritrail:q=1", "--method", "direct", "--no-plots", "--quiet",
        "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    res = _invoke(args, monkeypatch, tmp_path)
    assert res.exit_code == 0, res.output
    assert "Dataset towns: 24 claims (Fully Supported: 17, Not Fully Supported: 7)" in res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert "VeriTrail q=1" in json.dumps(results) and "Direct" in json.dumps(results)
