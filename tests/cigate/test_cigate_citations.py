"""Citation statuses in the CI outputs (JUnit, SARIF, GitHub annotations) through the CLI.

The run is examples/citations with its oracle (docs/citations.md): c2 is misattributed (true, but
its evidence is in museum.txt and it cites collection.txt), c5 cites a source that does not
support it; with `--max-miscited 0.2` the gate fails (2 of 5 cited claims), without it it does
not, and the miscited findings are warnings only.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_cigate_outputs import validate_junit, validate_sarif

from veritrail.cigate import Kind, report_findings
from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
EX = Path("examples") / "citations"
"""Relative: the oracle file names the sources' nodes as the docs' command (from the root) does."""
MUSEUM = str(EX / "sources" / "museum.txt")
COLLECTION = str(EX / "sources" / "collection.txt")


def _run(t: Path, *gate: str) -> dict[str, Any]:
    args = [
        "check",
        str(EX / "answer.md"),
        MUSEUM,
        COLLECTION,
        "--claims",
        str(EX / "claims.json"),
        "--oracle",
        str(EX / "oracle.json"),
        "--citations",
        "auto",
        *gate,
        "--run-dir",
        str(t / "run"),
        "--out",
        str(t / "report.json"),
        "--junit",
        str(t / "junit.xml"),
        "--sarif",
        str(t / "out.sarif"),
        "--annotations",
        "github",
        "--quiet",
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return {
        "code": res.exit_code,
        "stdout": res.stdout,
        "report": json.loads((t / "report.json").read_text(encoding="utf-8")),
        "junit": (t / "junit.xml").read_text(encoding="utf-8"),
        "sarif": json.loads((t / "out.sarif").read_text(encoding="utf-8")),
    }


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("gated"), "--max-miscited", "0.2")


@pytest.fixture(scope="module")
def ungated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("ungated"))


def test_findings_one_per_miscited_claim(gated: dict[str, Any]) -> None:
    miscited = [f for f in report_findings(gated["report"]) if f.kind is Kind.MISCITED]
    assert [(f.claim_id, f.citation) for f in miscited] == [
        ("c2", "misattributed"),
        ("c5", "cited_not_supporting"),
    ]
    for f in miscited:
        assert f.gate_failed
        assert f.cited_nodes[0].endswith("collection.txt#1")
        assert f.supporting_nodes[0].endswith("museum.txt#1")
        assert "cites" in f.cites and "evidence in" in f.cites


def test_junit_fails_the_citation_cases_only_when_the_gate_fails(
    gated: dict[str, Any], ungated: dict[str, Any]
) -> None:
    assert gated["code"] == 1
    validate_junit(gated["junit"])
    validate_junit(ungated["junit"])

    def cases(text: str) -> dict[str, ET.Element]:
        root = ET.fromstring(text)
        return {c.get("name", "").split(":")[0]: c for c in root.iter("testcase")}

    g, u = cases(gated["junit"]), cases(ungated["junit"])
    assert set(g) == set(u) == {f"c{i}" for i in range(1, 7)} | {"c2 citation", "c5 citation"}
    failure = g["c2 citation"].find("failure")
    assert failure is not None and failure.get("type") == "misattributed"
    assert "museum.txt#1" in (failure.text or "") and "collection.txt#1" in (failure.text or "")
    assert g["c5 citation"].find("failure") is not None
    # Without the gate the citation cases pass: the exit status does not count them either.
    assert u["c2 citation"].find("failure") is None and u["c5 citation"].find("failure") is None
    root_g, root_u = ET.fromstring(gated["junit"]), ET.fromstring(ungated["junit"])
    # c5 and c6 are Not Fully Supported in both runs; the gate adds c2's and c5's citation cases.
    assert (root_g.get("failures"), root_u.get("failures")) == ("4", "2")


def test_sarif_miscited_rule_and_levels(gated: dict[str, Any], ungated: dict[str, Any]) -> None:
    for out in (gated, ungated):
        validate_sarif(out["sarif"])
        run = out["sarif"]["runs"][0]
        assert "miscited" in [r["id"] for r in run["tool"]["driver"]["rules"]]
    g = [r for r in gated["sarif"]["runs"][0]["results"] if r["ruleId"] == "miscited"]
    u = [r for r in ungated["sarif"]["runs"][0]["results"] if r["ruleId"] == "miscited"]
    assert [r["properties"]["claimId"] for r in g] == ["c2", "c5"]
    assert [r["level"] for r in g] == ["error", "error"]
    assert [r["level"] for r in u] == ["warning", "warning"]
    props = g[0]["properties"]
    assert props["citation"] == "misattributed" and props["gateFailed"] is True
    assert props["citedNodes"][0].endswith("collection.txt#1")
    assert props["supportingNodes"][0].endswith("museum.txt#1")


def test_github_annotations_name_the_status_and_nodes(
    gated: dict[str, Any], ungated: dict[str, Any]
) -> None:
    def miscited(stdout: str) -> list[str]:
        return [line for line in stdout.splitlines() if "title=Miscited" in line]

    g, u = miscited(gated["stdout"]), miscited(ungated["stdout"])
    assert len(g) == len(u) == 2
    assert all(line.startswith("::error ") for line in g)
    assert all(line.startswith("::warning ") for line in u)
    assert "claim c2 (misattributed%3A cites " in g[0] and "evidence in " in g[0]
    assert "claim c5 (cited_not_supporting%3A" in g[1]


def test_a_run_without_citations_has_no_miscited_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(
        cli,
        [
            "check",
            str(EX / "answer.md"),
            MUSEUM,
            COLLECTION,
            "--claims",
            str(EX / "claims.json"),
            "--oracle",
            str(EX / "oracle.json"),
            "--run-dir",
            str(tmp_path / "run"),
            "--out",
            str(tmp_path / "r.json"),
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0  # no gate: c5 and c6 Not Fully Supported, nothing failed
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    kinds = [f.kind for f in report_findings(report)]
    assert Kind.MISCITED not in kinds and kinds.count(Kind.UNSUPPORTED) == 2
