"""`veritrail check/verify --citations`: each citation status through the CLI (the shipped
example, with its oracle and with the demonstration model), the `--max-miscited` gate's exit 1,
and bad options refused with exit 2 before any model call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result

import veritrail as vt
from veritrail.cli.main import cli
from veritrail.outcome import ExitCode
from veritrail.report import REPORT_VERSION
from veritrail.report_model import SCHEMA_FILE

ROOT = Path(__file__).resolve().parents[2]
EX = "examples/citations"
SOURCES = [f"{EX}/sources/museum.txt", f"{EX}/sources/collection.txt"]
MUSEUM, COLLECTION = (f"{s}#1" for s in SOURCES)

EXPECTED = {
    "c1": ("Fully Supported", "supported_by_cited"),  # cites [1] museum.txt, the evidence's
    "c2": ("Fully Supported", "misattributed"),  # cites [2] collection.txt, evidence in museum
    "c3": ("Fully Supported", "uncited"),  # no marker
    "c4": ("Fully Supported", "supported_by_cited"),  # a markdown link to .../collection.txt
    "c5": ("Not Fully Supported", "cited_not_supporting"),  # [^2] collection, evidence museum
    "c6": ("Not Fully Supported", "unsupported"),  # no source holds any evidence
}


@pytest.fixture
def example(tmp_path: Path) -> Path:
    # The conftest made tmp_path the current directory; the oracle names chunks by these paths.
    shutil.copytree(ROOT / EX, tmp_path / EX)
    return tmp_path


def _check(*extra: str, model: tuple[str, ...] | None = None) -> Result:
    how = model if model is not None else ("--oracle", f"{EX}/oracle.json")
    args = ["check", f"{EX}/answer.md", *SOURCES, "--claims", f"{EX}/claims.json", *how]
    env = {"VERITRAIL_MODEL": None, "OPENAI_API_KEY": None}
    return CliRunner().invoke(cli, [*args, "--run-dir", "run", *extra], env=env)


def _report(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def test_each_status_through_check_with_the_oracle(example: Path) -> None:
    res = _check("--citations", "auto", "--out", "r.json", "--html", "r.html")
    assert res.exit_code == 0, res.output
    doc = _report(example / "r.json")
    jsonschema.validate(doc, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert doc["version"] == REPORT_VERSION and doc["run"]["citations"] == "auto"
    got = {c["id"]: (c["verdict"], c["citation"]["kind"]) for c in doc["claims"]}
    assert got == EXPECTED
    by_id = {c["id"]: c["citation"] for c in doc["claims"]}
    assert by_id["c2"]["markers"] == ["[2]"]
    assert by_id["c2"]["cited_nodes"] == [COLLECTION]
    assert by_id["c2"]["supporting_nodes"] == [MUSEUM]
    assert by_id["c5"]["cited_nodes"] == [COLLECTION]  # the footnote's definition names it
    assert by_id["c6"]["supporting_nodes"] == []
    assert doc["summary"]["citations"] == {
        "supported_by_cited": 2,
        "misattributed": 1,
        "cited_not_supporting": 1,
        "unsupported": 1,
        "uncited": 1,
    }
    # The terminal summary names each claim's status.
    table = res.output[res.output.index("Citations") : res.output.index("Error stages")]
    for cid, (_, kind) in EXPECTED.items():
        assert any(cid in line and kind in line for line in table.splitlines()), (cid, table)
    # The HTML page carries the citation objects its claim cards show, and the card's code.
    html = (example / "r.html").read_text(encoding="utf-8")
    assert '"kind":"misattributed"' in html and "citationLine" in html


def test_the_same_statuses_with_the_demonstration_model(example: Path) -> None:
    res = _check(
        "--citations",
        "auto",
        "--out",
        "r.json",
        "--cache",
        "off",
        model=("--model", "demo/overlap"),
    )
    assert res.exit_code == 0, res.output
    doc = _report(example / "r.json")
    assert doc["model"] == "demo/overlap"
    got = {c["id"]: (c["verdict"], c["citation"]["kind"]) for c in doc["claims"]}
    assert got == EXPECTED


def test_without_citations_the_report_has_none(example: Path) -> None:
    res = _check("--out", "r.json")
    assert res.exit_code == 0, res.output
    doc = _report(example / "r.json")
    assert all("citation" not in c for c in doc["claims"])
    assert "citations" not in doc["summary"] and "citations" not in doc["run"]
    assert "Citations" not in res.output


def test_the_miscited_gate_exits_1_and_names_the_claims(example: Path) -> None:
    res = _check("--citations", "auto", "--max-miscited", "0.2", "--out", "r.json")
    assert res.exit_code == ExitCode.GATE, res.output
    assert (
        "gate failed: 2 of 5 cited claims (40.0%) cite a source that does not hold their "
        "evidence, above --max-miscited 0.2 (20.0%):" in res.output
    )
    assert "c2: The Harbour Museum was founded by Marta Reyes" in res.output
    assert "(misattributed)" in res.output and "(cited_not_supporting)" in res.output
    # The report records the gate: loading it gives the run's exit status.
    assert _report(example / "r.json")["run"]["max_miscited"] == 0.2
    assert vt.load_report(example / "r.json").exit_code is ExitCode.GATE
    # At a rate the share does not pass, the run passes.
    ok = _check("--citations", "auto", "--max-miscited", "0.4", "--run-dir", "run2")
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--citations", "(["], "error: --citations '([' is not a regular expression"),
        (["--citations", r"\d+"], "needs a group holding the reference"),
        (["--max-miscited", "0.5"], "error: --max-miscited needs --citations auto"),
        (["--citations", "auto", "--max-miscited", "2"], "max_miscited must be between 0 and 1"),
    ],
)
def test_bad_options_exit_2_in_one_line_before_any_run(
    example: Path, args: list[str], message: str
) -> None:
    res = _check(*args)
    assert res.exit_code == ExitCode.USAGE, res.output
    assert message in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert not (example / "run").exists()  # decided before the run started


def test_verify_with_a_user_pattern_and_claims_found_by_their_text(tmp_path: Path) -> None:
    dag = {
        "meta": {"urls": {"atlas": "https://ex.org/atlas"}},
        "nodes": [
            {"id": "atlas", "text": "Lyon lies on the Rhône.", "sources": []},
            {"id": "almanac", "text": "Lyon hosts a festival of lights.", "sources": []},
            {
                "id": "answer",
                "text": "Lyon lies on the Rhône {src:2}. Lyon hosts a festival of lights {src:2}.",
                "sources": ["atlas", "almanac"],
            },
        ],
    }
    (tmp_path / "dag.json").write_text(json.dumps(dag), encoding="utf-8")
    claims = [  # no sentence indices: found in the answer by their text
        {"id": "k1", "text": "Lyon lies on the Rhône"},
        {"id": "k2", "text": "Lyon hosts a festival of lights"},
    ]
    (tmp_path / "claims.json").write_text(json.dumps(claims), encoding="utf-8")
    oracle = {
        "claims": [
            {"claim": c["text"], "evidence": {n: [0]}, "verdicts": ["Fully Supported"]}
            for c, n in zip(claims, ["atlas", "almanac"], strict=True)
        ]
    }
    (tmp_path / "oracle.json").write_text(json.dumps(oracle), encoding="utf-8")
    args = ["verify", "dag.json", "--claims", "claims.json", "--oracle", "oracle.json"]
    res = CliRunner().invoke(
        cli, [*args, "--citations", r"\{src:(\d+)\}", "--out", "r.json", "--run-dir", "run"]
    )
    assert res.exit_code == 0, res.output
    doc = _report(tmp_path / "r.json")
    got = {c["id"]: c["citation"] for c in doc["claims"]}
    assert got["k1"]["kind"] == "misattributed" and got["k1"]["cited_nodes"] == ["almanac"]
    assert got["k2"]["kind"] == "supported_by_cited"
    assert got["k1"]["located_by"] == got["k2"]["located_by"] == "text"
    assert got["k1"]["markers"] == ["{src:2}"]
