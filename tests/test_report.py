"""The report: JSON Schema, round trip of claims, format/version checks."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dagkit import make_dag
from veritrail.method.claims import claim_from_json, claim_to_json, claims_to_json
from veritrail.records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    IssueKind,
    SelectionIssue,
    Termination,
)
from veritrail.report import (
    ReportFormatError,
    claim_from_dict,
    claim_to_dict,
    comparable,
    read_report,
)


def _schema() -> dict[str, Any]:
    return json.loads((resources.files("veritrail") / "schemas" / "report.schema.json").read_text())


def test_worked_example_report_matches_schema_and_round_trips(run_cli: Any, tmp_path: Path) -> None:
    edges = {"R1": [], "R2": [], "M": ["R1", "R2"], "T": ["M"]}
    claims = ["First claim text.", "Second claim text.", "Unknown to the oracle."]
    oracle = {
        "claims": [
            {
                "claim": claims[0],
                "evidence": {"M": [0], "R1": [1]},
                "summaries": {"M": "M says it."},
                "verdicts": ["Fully Supported"],
            },
            {
                "claim": claims[1],
                "subclaims": ["a part", "another part"],
                "evidence": {"M": [0, 7]},
                "verdicts": ["Fully Supported", "Not Fully Supported"],
            },
        ]
    }
    code, out, rep = run_cli(make_dag(edges), claims, oracle)
    assert code == 3, out  # the claim unknown to the oracle ends in error: exit 3 (issue 14)
    jsonschema.validate(rep, _schema())
    for c in rep["claims"]:
        # `offsets` are computed from the DAG by build_report, not kept with the claim.
        assert "offsets" in c
        assert claim_to_dict(claim_from_dict(c)) == {k: v for k, v in c.items() if k != "offsets"}
    assert rep["claims"][1]["subclaims"] == ["a part", "another part"]
    assert rep["claims"][1]["iterations"][0]["dropped_ids"] == ["M#7"]
    assert rep["summary"]["verdicts"] == {
        "Fully Supported": 1,
        "Not Fully Supported": 1,
        "Inconclusive": 0,
        "error": 1,
    }
    p = tmp_path / "copy.json"
    p.write_text(json.dumps(rep))
    assert comparable(read_report(p)) == comparable(rep)


def test_load_report_rejects_other_formats(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format": "something-else", "version": 1}))
    with pytest.raises(ReportFormatError, match="not a VeriTrail report"):
        read_report(p)
    p.write_text(json.dumps({"format": "veritrail-report", "version": 99}))
    with pytest.raises(ReportFormatError, match="version 99"):
        read_report(p)


def _schema_of_claim() -> dict[str, Any]:
    # The claim's definition, with the definitions it refers to (the schema is generated from
    # report_model: every object is a `$defs` entry).
    schema = _schema()
    return {"$defs": schema["$defs"], **schema["$defs"]["ClaimDoc"]}


def test_issue_kinds_are_the_enum_and_the_schema_lists_them() -> None:
    kind = _schema()["$defs"]["IssueKind"]
    assert kind["enum"] == [k.value for k in IssueKind]
    r = ClaimResult(
        claim=Claim("c1", "A claim."),
        subclaims=(),
        verdict=None,
        reasoning="",
        termination=Termination.ERROR,
        iterations=(),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
        error="stopped",
        issues=tuple(SelectionIssue(k, f"a {k} issue") for k in IssueKind),
    )
    d = claim_to_dict(r)
    # The report holds the plain strings, exactly as before the enum.
    assert [type(i["kind"]) for i in d["issues"]] == [str] * len(IssueKind)
    assert [i["kind"] for i in d["issues"]] == [
        "unknown_id",
        "unparseable_reply",
        "provenance_truncated",
    ]
    jsonschema.validate(d, _schema_of_claim())
    back = claim_from_dict(json.loads(json.dumps(d)))
    assert back == r and all(isinstance(i.kind, IssueKind) for i in back.issues)
    bad = {**d, "issues": [{"kind": "step_error", "detail": "x"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _schema_of_claim())


def test_a_claims_json_is_written_in_one_place() -> None:
    c = Claim("c1", "A claim.", (2, 0))
    bare = Claim("c2", "Another.")
    assert claim_to_json(c) == {"id": "c1", "text": "A claim.", "sentence_indices": [2, 0]}
    # The report and the run directory always write the indices; the claims file only when given.
    assert claim_to_json(bare) == {"id": "c2", "text": "Another.", "sentence_indices": []}
    assert claims_to_json([c, bare]) == [claim_to_json(c), {"id": "c2", "text": "Another."}]
    assert claim_from_json(claim_to_json(c)) == c
    assert claim_from_json({"id": "c2", "text": "Another."}) == bare
    r = ClaimResult(
        claim=c,
        subclaims=(),
        verdict=None,
        reasoning="",
        termination=Termination.ERROR,
        iterations=(),
        provenance=(),
        error_stages=(),
        error_stage_status=ErrorStageStatus.NOT_APPLICABLE,
        cost=Cost(),
    )
    d = claim_to_dict(r)
    assert list(d)[:4] == ["id", "text", "sentence_indices", "subclaims"]  # the report's order
    assert {k: d[k] for k in ("id", "text", "sentence_indices")} == claim_to_json(c)


def test_an_issue_is_written_and_read_in_one_place() -> None:
    from veritrail.records import IssueKind, SelectionIssue

    for kind in IssueKind:
        issue = SelectionIssue(kind, "detail\nwith a line break")
        doc = issue.to_json()
        assert doc == {"kind": kind.value, "detail": "detail\nwith a line break"}
        assert type(doc["kind"]) is str  # plain JSON, not the enum
        assert SelectionIssue.from_json(json.loads(json.dumps(doc))) == issue
    with pytest.raises(ValueError):
        SelectionIssue.from_json({"kind": "step_error", "detail": ""})
