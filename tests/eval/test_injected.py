"""`veritrail eval injected:DIR`: the figures (recall, stage and node accuracy, false alarms) from
hand-made detections, the stage baseline, and inject → eval through the CLI on DAGs from
from-trace, from-graphrag and from-booookscore (in tmp_path, with the demonstration model)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.dag import Dag
from veritrail.detectors.base import Detection
from veritrail.detectors.registry import BuildContext, build_method
from veritrail.eval.injected import share, summarize_injected
from veritrail.eval.runner import EvalRun
from veritrail.lm.demo import DEMO_LABEL
from veritrail.method.config import VerifyConfig
from veritrail.records import Claim, ErrorStageStatus, GoldClaim, Verdict

FS, NFS = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "dag.json"
METHODS = ["veritrail:q=1", "earliest-stage", "rag:k=2,embedder=hashing", "direct"]


def _injected(kind: str, stage: int, node: str) -> GoldClaim:
    return GoldClaim(
        "injected", "x", NFS, meta={"role": "injected", "kind": kind, "stage": stage, "node": node}
    )


def _det(key: str, verdict: Verdict, stages: tuple[int, ...] = (), blamed: Any = None) -> Detection:
    return Detection(
        "m",
        key,
        verdict,
        lm_calls=2,
        input_tokens=10,
        output_tokens=4,
        error_stages=stages,
        error_stage_status=ErrorStageStatus.IDENTIFIED if stages else None,
        detail={"blamed_nodes": blamed} if blamed is not None else {},
    )


def test_figures_from_hand_made_detections() -> None:
    gold = {
        "v1/injected": _injected("number", 2, "a"),
        "v2/injected": _injected("number", 3, "t"),
        "v3/injected": _injected("negation", 2, "a"),
        "v4/injected": _injected("negation", 2, "b"),
        "v1/t1": GoldClaim("t1", "y", FS, meta={"role": "untouched", "clean": "clean/t1"}),
        "v2/t1": GoldClaim("t1", "y", FS, meta={"role": "untouched", "clean": "clean/t1"}),
        "clean/t1": GoldClaim("t1", "y", FS, meta={"role": "clean"}),
    }
    preds = {
        "v1/injected": _det("v1/injected", NFS, (2,), ["a"]),  # exact stage and node
        "v2/injected": _det("v2/injected", NFS, (2,), ["a"]),  # too early
        "v3/injected": _det("v3/injected", NFS, (3,), ["t"]),  # too late
        "v4/injected": _det("v4/injected", FS),  # missed
        "v1/t1": _det("v1/t1", FS),
        "v2/t1": _det("v2/t1", NFS, (3,)),  # a false alarm
        "clean/t1": _det("clean/t1", FS),
    }
    run = EvalRun("d", gold, ["m"], {"m": preds})
    s = summarize_injected(run, resamples=200, seed=1)
    assert (s.injected, s.untouched) == (4, 2)
    r = s.rows[0]
    assert (r.recall.k, r.recall.n) == (3, 4)
    assert r.recall_by_kind["number"].value == 1.0 and r.recall_by_kind["negation"].value == 0.5
    assert r.recall_by_stage[2].k == 2 and r.recall_by_stage[3].k == 1
    assert r.localised == 3
    assert (r.stage_exact.k, r.too_early.k, r.too_late.k) == (1, 1, 1)
    assert r.node_exact.k == 1
    assert (r.stage_by_kind["number"].k, r.stage_by_kind["number"].n) == (1, 2)
    assert (r.stage_by_kind["negation"].k, r.stage_by_kind["negation"].n) == (0, 1)
    assert (r.false_alarm.k, r.false_alarm.n) == (1, 2)
    assert r.calls_per_claim == 2.0
    doc = s.to_json()
    assert doc["methods"][0]["stage_accuracy"]["n"] == 3
    assert summarize_injected(run, resamples=200, seed=1) == s  # seeded: the same intervals


def test_share_interval() -> None:
    x = share(7, 10, resamples=500, seed=0)
    assert x.value == 0.7 and x.low is not None and x.high is not None
    assert 0.0 <= x.low <= 0.7 <= x.high <= 1.0
    assert share(7, 10, resamples=500, seed=0) == x
    assert share(0, 0).value is None
    assert share(5, 5, resamples=100).low == 1.0


async def test_stage_baseline_blames_the_earliest_stage_holding_the_words() -> None:
    dag = Dag.from_records(
        [
            {"id": "r", "text": "The mill opened in 1850 beside the river.", "sources": []},
            {"id": "m", "text": "The mill opened in 1850. Its owner kept bees.", "sources": ["r"]},
            {"id": "t", "text": "The mill opened in 1850. Its owner kept bees.", "sources": ["m"]},
        ]
    )
    det = build_method("earliest-stage", BuildContext(model=None, base_config=VerifyConfig()))
    out = await det.detect(
        dag, [Claim("a", "The mill opened in 1850."), Claim("b", "Its owner kept bees.")]
    )
    assert out[0].verdict == FS and out[0].error_stages == ()
    assert out[1].verdict == NFS and out[1].error_stages == (2,)
    assert out[1].detail["blamed_nodes"] == ["m"] and out[1].lm_calls == 0
    with pytest.raises(ValueError):
        build_method("earliest-stage:coverage=2", BuildContext(None, VerifyConfig()))


def inject_then_eval(dag: Path, t: Path, *extra: str, n: int = 6) -> dict[str, Any]:
    out = t / "inj"
    r = CliRunner().invoke(
        cli,
        [
            "inject",
            str(dag),
            "--n",
            str(n),
            "--seed",
            "0",
            "--max-untouched",
            "2",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    args = ["eval", f"injected:{out}", "--model", "demo/overlap", "--quiet", "--format", "json"]
    for m in METHODS:
        args += ["--method", m]
    r = CliRunner().invoke(cli, [*args, "--bootstrap", "200", "--cache", "off", *extra])
    assert r.exit_code == 0, r.output
    doc: dict[str, Any] = json.loads(r.stdout)
    assert doc["label"] == f"demo/overlap: {DEMO_LABEL}"
    assert [m["method"] for m in doc["methods"]][1] == "Earliest stage"
    assert doc["injected_claims"] >= 1
    for m in doc["methods"]:
        assert m["recall"]["n"] == doc["injected_claims"]
    return doc


def test_quickstart_inject_then_eval_is_deterministic(tmp_path: Path) -> None:
    a = inject_then_eval(QUICKSTART, tmp_path / "a")
    b = inject_then_eval(QUICKSTART, tmp_path / "b")
    assert a == b
    rows = {m["method"]: m for m in a["methods"]}
    assert rows["Earliest stage"]["calls_per_claim"] == 0
    assert rows["VeriTrail q=1"]["calls_per_claim"] > 0
    assert rows["RAG k=2 (hashing (not semantic))"]["stage_accuracy"]["n"] == 0  # no stage


def test_eval_injected_bad_directory_exits_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["eval", f"injected:{tmp_path}", "--quiet"])
    assert r.exit_code == 2 and "no injected.json" in r.output


LANGFUSE_TRACE = {
    "id": "t-1",
    "name": "rag",
    "timestamp": "2025-05-01T10:00:00.000Z",
    "input": {"question": "When can I reach the summit of Mount Oro?"},
    "output": "The summit hut on Mount Oro opens in June. The Oro cable car runs every twenty "
    "minutes in summer.",
    "observations": [
        {
            "id": "o1",
            "traceId": "t-1",
            "type": "SPAN",
            "name": "pipeline",
            "startTime": "2025-05-01T10:00:00.000Z",
            "endTime": "2025-05-01T10:00:09.000Z",
            "parentObservationId": None,
            "level": "DEFAULT",
            "metadata": {},
        },
        {
            "id": "o4",
            "traceId": "t-1",
            "type": "GENERATION",
            "name": "answer",
            "startTime": "2025-05-01T10:00:03.000Z",
            "endTime": "2025-05-01T10:00:08.000Z",
            "parentObservationId": "o1",
            "level": "DEFAULT",
            "metadata": {},
            "model": "gpt-4o-mini",
            "input": [
                {
                    "role": "system",
                    "content": "Answer from this context only:\n\nMount Oro is 2,310 metres "
                    "high. The summit hut on Mount Oro opens in June.\n\nThe Oro cable car "
                    "was built in 1974. It runs every twenty minutes in summer.",
                },
                {"role": "user", "content": "When can I reach the summit of Mount Oro?"},
            ],
            "output": {
                "role": "assistant",
                "content": "The summit hut on Mount Oro opens in June. The Oro cable car runs "
                "every twenty minutes in summer.",
            },
        },
    ],
}


def test_a_dag_from_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(LANGFUSE_TRACE), encoding="utf-8")
    dag = tmp_path / "dag.json"
    r = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(dag)])
    assert r.exit_code == 0, r.output
    doc = inject_then_eval(dag, tmp_path, n=4)
    assert doc["injected_claims"] >= 3  # no number in the answer: three kinds apply


@pytest.mark.skipif(
    not (SHARED / "graphrag").is_dir() or importlib.util.find_spec("pyarrow") is None,
    reason="shared/data/graphrag or pyarrow not present",
)
def test_a_dag_from_graphrag(tmp_path: Path) -> None:
    dag = tmp_path / "dag.json"
    r = CliRunner().invoke(
        cli,
        [
            "from-graphrag",
            str(SHARED / "graphrag" / "tests_verbs_data"),
            "--terminal-report",
            "84",
            "--out",
            str(dag),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = inject_then_eval(dag, tmp_path)
    assert set(doc["injected_by_stage"]) == {"2", "3"}


@pytest.mark.skipif(
    not (SHARED / "booookscore").is_dir(), reason="shared/data/booookscore not present"
)
@pytest.mark.parametrize("trace", ["claude-88000-hier.json", "claude-88000-inc.json"])
def test_a_dag_from_booookscore(tmp_path: Path, trace: str) -> None:
    dag = tmp_path / "dag.json"
    r = CliRunner().invoke(
        cli,
        [
            "from-booookscore",
            str(SHARED / "booookscore" / trace),
            "--book",
            "catfish-rolling.epub",
            "--out",
            str(dag),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = inject_then_eval(dag, tmp_path)
    assert doc["injected_claims"] == 6


@pytest.mark.parametrize("fmt", ["markdown", "table"])
def test_no_stage_tables_when_no_method_names_a_stage(fmt: str) -> None:
    """RAG and direct alone: the two stage tables are one line, not headers without a row."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "injected" / "quickstart"
    r = CliRunner().invoke(
        cli,
        [
            "eval",
            f"injected:{bench}",
            "--model",
            "demo/overlap",
            "--cache",
            "off",
            "--method",
            "direct",
            "--quiet",
            "--no-plots",
            "--bootstrap",
            "50",
            "--format",
            fmt,
        ],
        terminal_width=200,
    )
    assert r.exit_code == 0, r.output
    assert "stage accuracy: no method caught a claim with a stage" in r.stdout
    assert "stage accuracy per kind" not in r.stdout
    assert "stage accuracy per DAG" not in r.stdout
    assert "recall" in r.stdout


def _cut_slice(src: Path, dst: Path, kind: str) -> None:
    """The variants of `kind` from a benchmark folder, planted claims only
    (benchmarks/injected_slice.py's `cut`)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "injected_slice.py"
    spec = importlib.util.spec_from_file_location("injected_slice", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.cut(src, dst, kinds={kind}, untouched=0)


def test_citation_table_only_when_it_has_a_figure(tmp_path: Path) -> None:
    """A cited DAG with no citation claim and no untouched claim: one line, not a row of dashes;
    with a citation claim, the table."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "injected" / "cited-answer"

    def md(target: Path) -> str:
        r = CliRunner().invoke(
            cli,
            [
                *("eval", f"injected:{target}", "--model", "demo/overlap", "--cache", "off"),
                *("--method", "veritrail:q=1", "--quiet", "--no-plots", "--bootstrap", "50"),
                *("--format", "markdown"),
            ],
        )
        assert r.exit_code == 0, r.output
        return r.stdout

    _cut_slice(bench, tmp_path / "fab", "fabricated")
    out = md(tmp_path / "fab")
    assert "citations: nothing to measure here" in out
    assert "citation-status acc." not in out
    _cut_slice(bench, tmp_path / "wrong", "wrong-citation")
    out = md(tmp_path / "wrong")
    assert "citation-status acc." in out and "nothing to measure" not in out
