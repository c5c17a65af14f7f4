"""`veritrail eval injected:DIR` on the citation kinds: citation-status accuracy (computed by
`citations.attach_citations`, as ``--citations auto`` does) from hand-made results, citation false
alarms on untouched cited claims, "—" for methods with no citation status; then inject → eval
through the CLI with the demonstration model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.detectors.base import Detection
from veritrail.eval.datasets.injected import CITED_DAG, SOURCE
from veritrail.eval.injected import citation_rows, render_markdown, summarize_injected
from veritrail.eval.runner import EvalRun
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    GoldClaim,
    Termination,
    Verdict,
)

FS, NFS = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED

SOURCES = [
    {"id": "mill.txt", "text": "Edith Crane ground barley for twelve farms.", "sources": []},
    {"id": "comet.txt", "text": "Astronomers tracked the comet Velora.", "sources": []},
    {"id": "choir.txt", "text": "The Northgate choir sang in 1998.", "sources": []},
]
# A variant's final output: t1 cites the wrong source (gold misattributed), t2 lost its marker
# (gold uncited), t3 cites the wrong source too, t4 and t5 are untouched cited sentences.
ANSWER = (
    "Edith Crane ground barley for twelve farms [2]. Astronomers tracked the comet Velora. "
    "Edith Crane ground barley for the farms [3]. The Northgate choir sang in 1998 [3]. "
    "Astronomers tracked the comet Velora again [2]."
)


def _result(text: str, verdict: Verdict, evidence_from: str | None) -> ClaimResult:
    path = ((evidence_from, "answer"),) if evidence_from and verdict is FS else ()
    return ClaimResult(
        claim=Claim("c", text),
        subclaims=(),
        verdict=verdict,
        reasoning="",
        termination=Termination.ROOTS_ONLY,
        iterations=(),
        provenance=path,
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
    )


def _det(key: str, verdict: Verdict, native: Any = None) -> Detection:
    return Detection("m", key, verdict, native=native)


def test_citation_status_accuracy_from_hand_made_results(tmp_path: Path) -> None:
    dag = tmp_path / "dag.json"
    nodes = [*SOURCES, {"id": "answer", "text": ANSWER, "sources": [n["id"] for n in SOURCES]}]
    dag.write_text(json.dumps({"nodes": nodes}), encoding="utf-8")
    where = {CITED_DAG: str(dag), SOURCE: "cited"}
    gold = {
        "v1/injected": GoldClaim(
            "injected",
            "Edith Crane ground barley for twelve farms.",
            FS,
            meta={
                "role": "injected",
                "kind": "wrong-citation",
                "stage": 2,
                "node": "answer",
                "citation": "misattributed",
                **where,
            },
        ),
        "v2/injected": GoldClaim(
            "injected",
            "Astronomers tracked the comet Velora.",
            FS,
            meta={
                "role": "injected",
                "kind": "dropped-citation",
                "stage": 2,
                "node": "answer",
                "citation": "uncited",
                **where,
            },
        ),
        "v3/injected": GoldClaim(
            "injected",
            "Edith Crane ground barley for the farms.",
            FS,
            meta={
                "role": "injected",
                "kind": "wrong-citation",
                "stage": 2,
                "node": "answer",
                "citation": "misattributed",
                **where,
            },
        ),
        "v1/t4": GoldClaim(
            "t4",
            "The Northgate choir sang in 1998.",
            FS,
            meta={"role": "untouched", "clean": "clean/t4", **where},
        ),
        "v1/t5": GoldClaim(
            "t5",
            "Astronomers tracked the comet Velora again.",
            FS,
            meta={"role": "untouched", "clean": "clean/t5", **where},
        ),
    }
    texts = {k: g.text for k, g in gold.items()}
    veritrail = {
        # Supported by the mill, cites the comet: misattributed, as gold says.
        "v1/injected": _det("v1/injected", FS, _result(texts["v1/injected"], FS, "mill.txt")),
        # No marker: uncited, as gold says.
        "v2/injected": _det("v2/injected", FS, _result(texts["v2/injected"], FS, "comet.txt")),
        # Judged Not Fully Supported: not misattributed, a miss.
        "v3/injected": _det("v3/injected", NFS, _result(texts["v3/injected"], NFS, None)),
        # Evidence from the choir it cites: no alarm.
        "v1/t4": _det("v1/t4", FS, _result(texts["v1/t4"], FS, "choir.txt")),
        # Evidence from the mill, cites the comet: a citation false alarm.
        "v1/t5": _det("v1/t5", FS, _result(texts["v1/t5"], FS, "mill.txt")),
    }
    plain = {k: _det(k, FS) for k in gold}  # no provenance: no citation status
    run = EvalRun("d", gold, ["vt", "rag"], {"vt": veritrail, "rag": plain})
    s = summarize_injected(run, resamples=200, seed=1)
    assert s.injected == 0 and s.citation_by_kind == {"dropped-citation": 1, "wrong-citation": 2}
    vt, rag = s.rows
    assert vt.citation_accuracy is not None
    assert (vt.citation_accuracy.k, vt.citation_accuracy.n) == (2, 3)
    assert (vt.citation_by_kind["wrong-citation"].k, vt.citation_by_kind["wrong-citation"].n) == (
        1,
        2,
    )
    assert vt.citation_by_kind["dropped-citation"].value == 1.0
    assert (vt.citation_labelled_fs.k, vt.citation_labelled_fs.n) == (2, 3)
    assert vt.citation_false_alarm is not None
    assert (vt.citation_false_alarm.k, vt.citation_false_alarm.n) == (1, 2)
    assert rag.citation_accuracy is None and rag.citation_false_alarm is None
    assert (rag.citation_labelled_fs.k, rag.citation_labelled_fs.n) == (3, 3)
    header, rows = citation_rows(s)
    assert header[1] == "citation-status acc." and rows[1][1] == "—"
    assert rows[0][1].startswith("0.67 [") and rows[0][1].endswith("(2/3)")
    assert "citation-status acc." in render_markdown(s)
    doc = s.to_json()["methods"]
    assert doc[0]["citation_status_accuracy"]["k"] == 2
    assert doc[1]["citation_status_accuracy"] is None


CITED: list[dict[str, Any]] = [
    {
        "id": "mill.txt",
        "text": "The Harbour Mill opened in 1850 beside the river Tamsin. "
        "Its miller, Edith Crane, ground barley for twelve farms.",
        "sources": [],
    },
    {
        "id": "comet.txt",
        "text": "Astronomers tracked the comet Velora for nine months. "
        "Its tail stretched across four degrees of the evening sky.",
        "sources": [],
    },
    {
        "id": "answer",
        "text": "The Harbour Mill opened in 1850 beside the river Tamsin [1]. "
        "Its miller, Edith Crane, ground barley for twelve farms [1]. "
        "Astronomers tracked the comet Velora for nine months [2]. "
        "Its tail stretched across four degrees of the evening sky [2].",
        "sources": ["mill.txt", "comet.txt"],
    },
]


def test_inject_then_eval_through_the_cli(tmp_path: Path) -> None:
    dag = tmp_path / "dag.json"
    dag.write_text(json.dumps({"nodes": CITED}), encoding="utf-8")
    out = tmp_path / "inj"
    r = CliRunner().invoke(cli, ["inject", str(dag), "--n", "6", "--seed", "0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    args = ["eval", f"injected:{out}", "--model", "demo/overlap", "--cache", "off", "--quiet"]
    args += ["--method", "veritrail:q=1", "--method", "direct", "--bootstrap", "100"]
    r = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["citation_claims_by_kind"] == {"dropped-citation": 1, "wrong-citation": 1}
    assert doc["injected_claims"] == 4  # the content kinds only
    vt, direct = doc["methods"]
    acc = vt["citation_status_accuracy"]
    assert acc["n"] == 2 and 0 <= acc["k"] <= 2
    assert vt["citation_false_alarm_rate"]["n"] >= 1
    assert direct["citation_status_accuracy"] is None
    assert direct["citation_claims_labelled_fully_supported"]["n"] == 2
    r2 = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert r2.stdout == r.stdout  # deterministic
    md = CliRunner().invoke(cli, [*args, "--format", "markdown"])
    assert md.exit_code == 0 and "citation-status acc." in md.stdout
