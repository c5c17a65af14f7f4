"""The report: JSON Schema, round trip of claims, format/version checks."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dagkit import make_dag
from veritrail.report import (
    ReportFormatError,
    claim_from_dict,
    claim_to_dict,
    comparable,
    load_report,
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
        assert claim_to_dict(claim_from_dict(c)) == c
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
    assert comparable(load_report(p)) == comparable(rep)


def test_load_report_rejects_other_formats(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format": "something-else", "version": 1}))
    with pytest.raises(ReportFormatError, match="not a VeriTrail report"):
        load_report(p)
    p.write_text(json.dumps({"format": "veritrail-report", "version": 99}))
    with pytest.raises(ReportFormatError, match="version 99"):
        load_report(p)
