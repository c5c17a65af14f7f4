"""`verify --citations` follows citations through intermediate nodes (docs/citations.md,
"Citations through intermediate nodes"), through the CLI with the demonstration model: sources →
a summary citing them → a final answer citing the summary. The status is computed against the
sources the chain reaches: misattributed when it reaches the wrong one, supported when the right
one; a summary without markers stands for its own inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import reportkit
from veritrail.citations import SourceIndex, find_markers, follow_citations, parse_rule
from veritrail.cli.main import cli
from veritrail.dag import Dag

MUSEUM = "The Harbour Museum was founded in 1921 by Marta Reyes. Its building has three floors."
COLLECTION = "The collection holds 4,000 ship models. The oldest model dates from 1650."
CLAIMS = [
    {
        "id": "c1",
        "text": "Marta Reyes founded the Harbour Museum in 1921.",
        "sentence_indices": [0],
    },
    {"id": "c2", "text": "The collection holds 4,000 ship models.", "sentence_indices": [1]},
]
FINAL = (
    "Marta Reyes founded the Harbour Museum in 1921 [summary-1]. "
    "The collection holds 4,000 ship models [summary-1]."
)


def _dag(summary: str, final: str = FINAL) -> dict[str, Any]:
    return {
        "meta": {},
        "nodes": [
            {"id": "museum", "text": MUSEUM, "sources": []},
            {"id": "collection", "text": COLLECTION, "sources": []},
            {"id": "summary-1", "text": summary, "sources": ["museum", "collection"]},
            {"id": "final", "text": final, "sources": ["summary-1"]},
        ],
    }


def _verify(tmp_path: Path, dag: dict[str, Any], *extra: str) -> tuple[int, str, dict[str, Any]]:
    dag_path, claims, out = tmp_path / "dag.json", tmp_path / "claims.json", tmp_path / "r.json"
    dag_path.write_text(json.dumps(dag), encoding="utf-8")
    claims.write_text(json.dumps(CLAIMS), encoding="utf-8")
    args = ["verify", str(dag_path), "--claims", str(claims), "--model", "demo/overlap"]
    args += ["--citations", "auto", "--out", str(out), "--run-dir", str(tmp_path / "run")]
    r = CliRunner().invoke(cli, [*args, *extra])
    report = json.loads(out.read_text()) if out.exists() else {}
    return r.exit_code, r.output, report


def _citations(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    for c in report["claims"]:
        assert c["verdict"] == "Fully Supported", c
    return {c["id"]: c["citation"] for c in report["claims"]}


def test_a_chain_that_reaches_the_wrong_source_is_misattributed(tmp_path: Path) -> None:
    # The summary swaps its own markers: [2] (collection) on the founder, [1] (museum) on the
    # collection. Each claim's evidence sits in the summary's sentence carrying the wrong one.
    summary = (
        "Marta Reyes founded the Harbour Museum in 1921 [2]. "
        "The collection holds 4,000 ship models [1]."
    )
    code, output, report = _verify(tmp_path, _dag(summary), "--max-miscited", "0.5")
    cites = _citations(report)
    assert cites["c1"]["kind"] == "misattributed"
    assert cites["c1"]["cited_nodes"] == ["summary-1"]
    assert cites["c1"]["followed_nodes"] == ["collection"]
    assert cites["c1"]["supporting_nodes"] == ["museum"]
    assert cites["c2"]["kind"] == "misattributed"
    assert cites["c2"]["followed_nodes"] == ["museum"]
    assert report["summary"]["citations"]["misattributed"] == 2
    # The terminal table shows the chain; the gate counts the followed statuses.
    assert "summary-1 ⇒ collection" in output
    assert code == 1, output


def test_a_chain_that_reaches_the_right_source_is_supported(tmp_path: Path) -> None:
    summary = (
        "Marta Reyes founded the Harbour Museum in 1921 [1]. "
        "The collection holds 4,000 ship models (Source: collection)."
    )
    code, output, report = _verify(tmp_path, _dag(summary), "--max-miscited", "0")
    cites = _citations(report)
    assert cites["c1"]["kind"] == "supported_by_cited"
    assert cites["c1"]["followed_nodes"] == ["museum"]
    assert cites["c2"]["kind"] == "supported_by_cited"
    assert cites["c2"]["followed_nodes"] == ["collection"]
    assert code == 0, output


def test_only_the_markers_of_the_sentences_holding_the_evidence_are_followed(
    tmp_path: Path,
) -> None:
    # Both sources are cited somewhere in the summary; the founder's sentence cites only the
    # collection, so c1 is misattributed although the summary also cites the museum.
    summary = (
        "Marta Reyes founded the Harbour Museum in 1921 [2]. "
        "The collection holds 4,000 ship models [1, 2]."
    )
    _, _, report = _verify(tmp_path, _dag(summary))
    cites = _citations(report)
    assert cites["c1"]["kind"] == "misattributed"
    assert cites["c2"]["kind"] == "supported_by_cited"
    assert cites["c2"]["followed_nodes"] == ["museum", "collection"]


def test_a_summary_without_markers_stands_for_its_own_inputs(tmp_path: Path) -> None:
    summary = (
        "Marta Reyes founded the Harbour Museum in 1921. The collection holds 4,000 ship models."
    )
    _, _, report = _verify(tmp_path, _dag(summary))
    cites = _citations(report)
    for cid in ("c1", "c2"):
        assert cites[cid]["kind"] == "supported_by_cited"
        assert cites[cid]["followed_nodes"] == ["museum", "collection"]


def test_a_final_answer_citing_sources_directly_is_not_followed(tmp_path: Path) -> None:
    final = (
        "Marta Reyes founded the Harbour Museum in 1921 [2]. "
        "The collection holds 4,000 ship models [2]."
    )
    summary = (
        "Marta Reyes founded the Harbour Museum in 1921. The collection holds 4,000 ship models."
    )
    _, _, report = _verify(tmp_path, _dag(summary, final))
    cites = _citations(report)
    assert cites["c1"]["kind"] == "misattributed"
    assert cites["c2"]["kind"] == "supported_by_cited"
    # Sources cited directly lead to themselves (report version 5 always writes the field).
    assert cites["c1"]["followed_nodes"] == cites["c1"]["cited_nodes"]


AUTO = parse_rule("auto")


def test_a_bracketed_word_is_a_marker_only_when_it_is_a_node_id() -> None:
    assert AUTO is not None
    text = "Paris is big [summary-1], Lyon [maybe] too [2]."
    got = [(m.text, m.refs) for m in find_markers(text, AUTO, {"summary-1"})]
    assert got == [("[summary-1]", ("summary-1",)), ("[2]", ("2",))]
    assert [m.text for m in find_markers(text, AUTO)] == ["[2]"]


@pytest.mark.parametrize("back", ["[final]", "[summary-1]"])
def test_a_marker_pointing_back_up_the_chain_ends_there(back: str) -> None:
    # A summary citing itself or the answer above it: each node is visited once, and a node
    # reached only through such a loop contributes no source.
    assert AUTO is not None
    dag = Dag.from_records(
        [
            {"id": "museum", "text": MUSEUM, "sources": []},
            {"id": "summary-1", "text": f"The museum is old {back}.", "sources": ["museum"]},
            {"id": "final", "text": "It is old [summary-1].", "sources": ["summary-1"]},
        ]
    )
    index = SourceIndex.of(dag)
    got = follow_citations(dag, index, AUTO, ["summary-1"])
    # [final] is followed to its own input, summary-1, already seen: no source reached.
    assert got == []


def test_a_version_4_citation_reads_as_followed_to_its_cited_nodes() -> None:
    """Report version 5's migration note: a version 4 citation (never followed) has no
    `followed_nodes`; the typed model reads it as its `cited_nodes`, and the terminal table
    shows no "followed to" part for it. A version 5 citation that leads nowhere says so."""
    from veritrail.citations import citation_rows
    from veritrail.report_model import CitationDoc

    v4 = {
        "kind": "misattributed",
        "markers": ["[1]"],
        "cited_nodes": ["a"],
        "supporting_nodes": ["b"],
    }
    assert CitationDoc.model_validate(v4).followed_nodes == ["a"]
    nowhere = CitationDoc.model_validate({**v4, "cited_nodes": ["final"], "followed_nodes": []})
    assert nowhere.followed_nodes == []

    def report(citation: dict[str, Any], version: int) -> dict[str, Any]:
        return reportkit.report(
            [{"id": "c1", "verdict": "Fully Supported", "citation": citation}], version=version
        )

    (row,) = citation_rows(report(v4, 4))
    assert "⇒" not in row[2]
    (row,) = citation_rows(report({**v4, "cited_nodes": ["final"], "followed_nodes": []}, 5))
    assert row[2].endswith("⇒ no source")
