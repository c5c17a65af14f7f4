"""The shipped benchmark (benchmarks/injected/, issue 39): rebuilt byte for byte from the real
data, and a slice evaluated with the demonstration model and the stage baseline (counted,
deterministic figures). The full figures are in docs/evaluation.md."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.lm.demo import DEMO_LABEL

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "injected"
SHARED = ROOT.parent / "shared" / "data"


def eval_json(target: Path, *methods: str) -> dict[str, Any]:
    args = ["eval", f"injected:{target}", "--model", "demo/overlap", "--cache", "off"]
    for m in methods:
        args += ["--method", m]
    r = CliRunner().invoke(cli, [*args, "--quiet", "--format", "json", "--bootstrap", "200"])
    assert r.exit_code == 0, r.output
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_the_benchmark_holds_what_its_readme_says() -> None:
    manifests = sorted(BENCH.glob("*/injected.json"))
    assert [m.parent.name for m in manifests] == [
        "agent-booking",
        "booookscore-hier-catfish-rolling",
        "booookscore-hier-the-survivalists",
        "booookscore-inc-catfish-rolling",
        "cited-answer",
        "graphrag-report-84",
        "quickstart",
    ]
    variants = [v for m in manifests for v in json.loads(m.read_text("utf-8"))["variants"]]
    assert len(variants) == 78
    # The citation kinds' material: the cited answer only, 5 variants of each citation kind.
    cited = [json.loads(m.read_text("utf-8")) for m in manifests]
    assert [m["source"]["name"] for m in cited if m.get("citations")] == ["cited-answer.json"]
    kinds = [v["kind"] for v in variants if "citation" in v]
    assert sorted(kinds) == ["dropped-citation"] * 5 + ["wrong-citation"] * 5
    # Its sources are passages of GraphRAG's example inputs (MIT), not third-party web pages.
    answer = json.loads((BENCH / "cited-answer" / "clean" / "dag.json").read_text("utf-8"))
    assert [n["id"] for n in answer["nodes"]] == [
        "dulce.txt",
        "fezziwig.txt",
        "cratchit.txt",
        "answer",
    ]
    assert answer["meta"]["source"].startswith("GraphRAG example inputs")
    # The agent run's DAG is the conversation adapter's: tool calls with their arguments.
    agent = json.loads((BENCH / "agent-booking" / "clean" / "dag.json").read_text("utf-8"))
    texts = [n["text"] for n in agent["nodes"]]
    assert any(t.startswith('Tool call book_flight(flight="LH 400"') for t in texts)
    size = sum(p.stat().st_size for p in BENCH.rglob("*") if p.is_file())
    # 540 kB with the agent run and the cited answer (30 variants, each a full DAG copy).
    assert size < 600_000, "keep the committed benchmark small"


def test_slice_with_the_demonstration_model_and_the_stage_baseline() -> None:
    doc = eval_json(BENCH / "quickstart", "earliest-stage", "veritrail:q=1")
    assert doc["label"] == f"demo/overlap: {DEMO_LABEL}"
    assert (doc["injected_claims"], doc["untouched_claims"]) == (8, 24)
    assert doc["injected_by_kind"] == {"entity-swap": 3, "fabricated": 3, "negation": 2}
    assert doc["injected_by_stage"] == {"2": 6, "3": 2}
    base, vt = doc["methods"]
    # The stage baseline: no model, counted figures.
    assert base["method"] == "Earliest stage" and base["calls_per_claim"] == 0
    assert (base["recall"]["k"], base["recall"]["n"]) == (6, 8)
    assert {k: v["k"] for k, v in base["recall_by_kind"].items()} == {
        "entity-swap": 2,
        "fabricated": 3,
        "negation": 1,
    }
    assert (base["stage_accuracy"]["k"], base["stage_accuracy"]["n"]) == (6, 6)
    assert base["node_accuracy"]["k"] == 6
    assert (base["false_alarm_rate"]["k"], base["false_alarm_rate"]["n"]) == (0, 24)
    # VeriTrail with the word-overlap model: every injected claim caught, each with a stage.
    assert vt["method"] == "VeriTrail q=1" and vt["calls_per_claim"] > 0
    assert (vt["recall"]["k"], vt["recall"]["n"]) == (8, 8)
    assert vt["localised"] == 8
    assert vt["stage_accuracy"]["k"] + vt["too_early"]["k"] + vt["too_late"]["k"] == 8
    assert eval_json(BENCH / "quickstart", "earliest-stage", "veritrail:q=1") == doc


def test_agent_and_citation_slices_with_the_demonstration_model() -> None:
    # The agent run: every planted claim caught, 15 of 16 at the planted step (the figures of
    # docs/evaluation.md, counted and deterministic).
    agent = eval_json(BENCH / "agent-booking", "veritrail:q=1")["methods"][0]
    assert (agent["recall"]["k"], agent["recall"]["n"]) == (16, 16)
    assert (agent["stage_accuracy"]["k"], agent["stage_accuracy"]["n"]) == (15, 16)
    assert agent["citation_status_accuracy"] is None  # no marker in the agent's answer
    # The cited answer: citation-status accuracy on the citation kinds, no citation alarm. Its
    # sentences are made of their passages' words, so the word-overlap model finds every true
    # claim Fully Supported and each moved marker is misattributed.
    doc = eval_json(BENCH / "cited-answer", "veritrail:q=1", "direct")
    assert doc["citation_claims_by_kind"] == {"dropped-citation": 5, "wrong-citation": 5}
    assert doc["injected_by_kind"] == {
        "entity-swap": 5,
        "fabricated": 5,
        "negation": 5,
        "number": 5,
    }
    vt, direct = doc["methods"]
    acc = vt["citation_status_accuracy"]
    assert (acc["k"], acc["n"]) == (10, 10)
    by_kind = vt["citation_status_accuracy_by_kind"]
    assert (by_kind["wrong-citation"]["k"], by_kind["dropped-citation"]["k"]) == (5, 5)
    # 17 of the 20 planted claims caught, each at the planted stage (docs/evaluation.md).
    assert (vt["recall"]["k"], vt["recall"]["n"]) == (17, 20)
    assert (vt["stage_accuracy"]["k"], vt["stage_accuracy"]["n"]) == (17, 17)
    alarms = vt["citation_false_alarm_rate"]
    assert (alarms["k"], alarms["n"]) == (0, 90)
    assert direct["citation_status_accuracy"] is None


@pytest.mark.skipif(
    not (SHARED / "booookscore").is_dir()
    or not (SHARED / "graphrag").is_dir()
    or importlib.util.find_spec("pyarrow") is None,
    reason="shared/data or pyarrow not present",
)
@pytest.mark.slow  # 5-6 s on 2 cores: seven DAGs built and injected in a subprocess
def test_the_build_is_byte_identical(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "build_injected.py"),
            "--data",
            str(SHARED),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]

    def files(d: Path) -> dict[str, bytes]:
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()}

    # README.md and sources/ (the transcript and the cited answer) are inputs, not built.
    built = {
        k: v for k, v in files(BENCH).items() if k != "README.md" and not k.startswith("sources/")
    }
    assert files(tmp_path) == built


def _slice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "injected_slice.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_embedded_model_slices(tmp_path: Path) -> None:
    """benchmarks/injected_slice.py cuts the slices docs/evaluation.md's embedded-model figures
    were measured on; the same arguments give the same files, and an existing folder is refused."""
    one, two = tmp_path / "one", tmp_path / "two"
    assert _slice(str(one), "--dag", "quickstart", "--dag", "graphrag-report-84").returncode == 0
    agent = ("--dag", "agent-booking", "--kinds", "number,entity-swap", "--untouched", "1")
    assert _slice(str(two), *agent).returncode == 0
    assert (
        _slice(str(two), "--dag", "cited-answer", "--kinds", "number,entity-swap").returncode == 0
    )

    doc = eval_json(one, "earliest-stage")
    assert (doc["injected_claims"], doc["untouched_claims"]) == (16, 0)
    assert doc["injected_by_kind"] == {
        "entity-swap": 5,
        "fabricated": 6,
        "negation": 4,
        "number": 1,
    }
    doc = eval_json(two, "earliest-stage")
    assert (doc["injected_claims"], doc["untouched_claims"]) == (17, 7)
    assert doc["injected_by_kind"] == {"entity-swap": 8, "number": 9}
    manifest = json.loads((two / "agent-booking" / "injected.json").read_text())
    # One untouched claim per variant, by rotation through each variant's list.
    assert [v["untouched"] for v in manifest["variants"]] == [
        ["t1"],
        ["t3"],
        ["t4"],
        ["t1"],
        ["t3"],
        ["t4"],
        ["t1"],
    ]

    again = tmp_path / "again"
    assert _slice(str(again), *agent).returncode == 0
    files = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert files and all((again / f).read_bytes() == (two / f).read_bytes() for f in files)
    refused = _slice(str(two), "--dag", "cited-answer")
    assert refused.returncode == 2 and "not overwriting" in refused.stderr
    assert _slice(str(tmp_path / "x"), "--dag", "no-such-dag").returncode == 2
