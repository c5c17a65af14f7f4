"""Issue 43, point 9, through the CLI: `veritrail diff` reports a claim whose error stage or blamed
node changed with an unchanged verdict, and `veritrail review --stage N --node ID` sets them (checked
against the run's DAG, exit 2 otherwise). The quick start with its oracle makes the runs.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
QS = ROOT / "examples" / "quickstart"


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERITRAIL_RUNS_DIR", str(tmp_path / "runs"))
    args = [
        "verify", str(QS / "dag.json"), "--claims", str(QS / "claims.json"),
        "--oracle", str(QS / "oracle.json"), "--run-dir", str(tmp_path / "a"),
    ]  # fmt: skip
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same run, twice
    return tmp_path / "a", tmp_path / "b"


def _review(run: Path, *extra: str) -> tuple[int, str]:
    args = ["review", str(run), "c3", "--verdict", "unsupported", "--reason", "r", *extra]
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.output


def test_review_checks_the_stage_and_node_against_the_dag(two_runs: tuple[Path, Path]) -> None:
    _, b = two_runs
    code, out = _review(b, "--node", "nope")
    assert code == 2 and "has no node 'nope'" in out
    code, out = _review(b, "--stage", "2", "--node", "chunk-1")
    assert code == 2 and "node 'chunk-1' is at stage 1, not stage 2" in out
    code, out = _review(b, "--stage", "7")
    assert code == 2 and "no stage 7" in out
    assert not (b / "reviews.jsonl").exists()  # nothing recorded for refused reviews
    code, out = _review(b, "--stage", "1", "--node", "chunk-3")
    assert code == 0, out
    assert "reviewed Not Fully Supported, error stage 1, node chunk-3" in out
    report = json.loads((b / "report.json").read_text())
    c3 = next(c for c in report["claims"] if c["id"] == "c3")
    assert c3["review"]["error_stage"] == 1 and c3["review"]["nodes"] == ["chunk-3"]
    assert c3["error_stages"] == [2]  # the model's stays


def test_diff_reports_a_moved_trail_with_the_same_verdict(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_runs
    same = CliRunner().invoke(cli, ["diff", str(a), str(b), "--json", str(tmp_path / "0.json")])
    assert same.exit_code == 0, same.output
    assert json.loads((tmp_path / "0.json").read_text())["counts"]["trail_moved"] == 0
    assert _review(b, "--node", "chunk-3")[0] == 0  # the stage follows the node: 1
    args = ["diff", str(a), str(b), "--json", str(tmp_path / "d.json")]
    args += ["--html", str(tmp_path / "d.html")]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "Error stage or blamed node changed (same verdict)" in res.output
    doc = json.loads((tmp_path / "d.json").read_text())
    schema = json.loads((resources.files("veritrail") / "schemas" / "diff.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["version"] == 3 and doc["counts"]["trail_moved"] == 1
    (moved,) = [ch for ch in doc["changes"] if ch["trail_moved"]]
    assert moved["a"]["error_stages"] == [2] and moved["a"]["entered_at"] == ["summary-2"]
    assert moved["b"]["error_stages"] == [1] and moved["b"]["entered_at"] == ["chunk-3"]
    assert not moved["flipped"]
    page = (tmp_path / "d.html").read_text()
    assert 'id="vt-moved"' in page and "chunk-3" in page
