"""Issue 43, through the CLI: what a newcomer sees in the first hour is true and clear.

The keyless `demo/overlap` model (in-process, `veritrail.lm.demo`) makes the runs; the embedded
model's absence is simulated by hiding its packages from `lm.local_weights`.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import reportkit
from veritrail.cli.main import cli
from veritrail.lm import local_weights
from veritrail.report import MODEL_LABELS, model_kind, read_report, report_model_kind

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "examples" / "check"
QS = ROOT / "examples" / "quickstart"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("VERITRAIL_MODEL", "VERITRAIL_BASE_URL", "OPENAI_BASE_URL", "VERITRAIL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERITRAIL_CACHE", "0")
    monkeypatch.setenv("VERITRAIL_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)


def _check(tmp: Path, *extra: str) -> Result:
    args = [
        "check",
        str(CHECK / "answer.txt"),
        str(CHECK / "sources" / "*.txt"),
        "--run-dir",
        str(tmp / "run"),
        "--out",
        str(tmp / "report.json"),
        *extra,
    ]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_a_demonstration_run_is_labelled_in_the_terminal_and_the_report(tmp_path: Path) -> None:
    res = _check(tmp_path, "--model", "demo/overlap")
    assert res.exit_code in (0, 1), res.output
    assert "note: verdicts by demo/overlap: demonstration, not a judge." in res.output
    assert "verdicts by demo/overlap (demonstration, not a judge)" in res.output
    report = read_report(tmp_path / "report.json")
    assert report["version"] >= 3  # model_kind since version 3
    assert report["model_kind"] == "demonstration"
    assert report["model_label"] == "demonstration, not a judge"


def test_model_kinds_by_name_and_old_reports_read_the_same() -> None:
    assert model_kind("demo/overlap") == "demonstration"
    assert model_kind("openai/demo-overlap") == "demonstration"
    assert model_kind("local/qwen2.5-coder-1.5b") == "embedded"
    assert model_kind("openai/gpt-4o-mini") == "judge"
    assert model_kind("oracle") == "oracle"
    assert MODEL_LABELS["judge"] is None
    # A version 2 report has neither field: the kind is derived from its model.
    old = reportkit.report(version=2, model="local/smollm2-135m")
    assert report_model_kind(old) == (
        "embedded",
        MODEL_LABELS["embedded"],
    )


def test_a_rerun_says_the_claims_were_finished_and_nothing_was_called(tmp_path: Path) -> None:
    first = _check(tmp_path, "--model", "demo/overlap")
    assert "already finished" not in first.output
    again = _check(tmp_path, "--model", "demo/overlap")
    assert again.exit_code == first.exit_code
    out = " ".join(again.output.split())  # the rich console wraps long lines
    n = json.loads((tmp_path / "report.json").read_text())["summary"]["claims"]
    assert f"all {n} claims were already finished in {tmp_path / 'run'}" in out
    assert "no model call was made" in out


def test_a_core_install_without_the_embedded_model_stops_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_weights, "_package_dir", lambda package: None)  # no weights
    res = _check(tmp_path)  # the default model: local/qwen2.5-coder-1.5b
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    assert lines[0].startswith(
        "error: the embedded model local/qwen2.5-coder-1.5b is not installed"
    )
    assert "pip install 'veritrail[local-qwen]'" in lines[0] and "--model" in lines[0]
    assert "Traceback" not in res.output
    assert not (tmp_path / "run").exists()  # before any work
    assert not (tmp_path / "report.json").exists()


def test_the_summary_names_the_blamed_node_beside_the_stage(tmp_path: Path) -> None:
    args = [
        "verify",
        str(QS / "dag.json"),
        "--claims",
        str(QS / "claims.json"),
        "--oracle",
        str(QS / "oracle.json"),
        "--run-dir",
        str(tmp_path / "run"),
        "--out",
        str(tmp_path / "report.json"),
    ]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert "(error stage 2, node summary-2)" in res.output
    assert "verdicts by oracle (verdicts read from an oracle file, no model)" in res.output


def test_assert_supported_names_its_model_and_warns_it_is_not_a_judge(tmp_path: Path) -> None:
    from veritrail.testing import NotAJudgeWarning, assert_supported, assertions

    assertions._warned.discard("demo/overlap")
    sources = sorted((CHECK / "sources").glob("*.txt"))
    answer = "The Harbour Museum opened in 1921. Its oldest chart was drawn by Marta Reyes."
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(AssertionError) as failed:
            assert_supported(answer, sources, model="demo/overlap", run_dir=tmp_path / "r")
    first = str(failed.value).splitlines()[0]
    assert first == "veritrail, model demo/overlap (demonstration, not a judge):"
    hits: list[Any] = [w for w in got if issubclass(w.category, NotAJudgeWarning)]
    assert len(hits) == 1 and "demo/overlap" in str(hits[0].message)


def test_without_out_the_report_stays_in_the_run_directory(tmp_path: Path) -> None:
    args = [
        "verify",
        str(QS / "dag.json"),
        "--claims",
        str(QS / "claims.json"),
        "--oracle",
        str(QS / "oracle.json"),
        "--run-dir",
        str(tmp_path / "run"),
        "--html",
    ]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "report.json").exists()  # the working directory (the fixture's)
    assert not (tmp_path / "report.html").exists()
    assert (tmp_path / "run" / "report.json").is_file()
    assert (tmp_path / "run" / "report.html").is_file()
    assert f"report written to {tmp_path / 'run' / 'report.json'}" in res.output


def test_runs_with_no_runs_yet_says_so_and_exits_0(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["runs"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("no runs yet:")
    listed = CliRunner().invoke(cli, ["runs", "--json"], catch_exceptions=False)
    assert listed.exit_code == 0 and json.loads(listed.output) == []
    missing = CliRunner().invoke(cli, ["runs", "--runs-dir", str(tmp_path / "nope")])
    assert missing.exit_code == 2  # a directory named by hand that is not there is bad input


def test_two_pipelines_dag_json_are_named_apart(tmp_path: Path) -> None:
    dags = {}
    for folder, meta in (("summarize", {}), ("answer", {"name": "support answers"})):
        d = tmp_path / folder
        d.mkdir()
        doc = json.loads((QS / "dag.json").read_text())
        doc["meta"] = meta
        (d / "dag.json").write_text(json.dumps(doc))
        dags[folder] = d / "dag.json"
    for folder, dag in dags.items():
        args = [
            "verify",
            str(dag),
            "--claims",
            str(QS / "claims.json"),
            "--oracle",
            str(QS / "oracle.json"),
            "--run-dir",
            str(tmp_path / "runs" / f"{folder}-run"),
        ]
        assert CliRunner().invoke(cli, args, catch_exceptions=False).exit_code == 0
    res = CliRunner().invoke(cli, ["runs", "--json"], catch_exceptions=False)
    names = sorted(r["dag"] for r in json.loads(res.output))
    assert names == ["summarize/dag", "support answers"]


def test_ci_outputs_carry_the_demonstration_label(tmp_path: Path) -> None:
    res = _check(tmp_path, "--model", "demo/overlap", "--annotations", "github")
    errors = [line for line in res.output.splitlines() if line.startswith("::error ")]
    assert errors, res.output
    # Properties are escaped by GitHub's rules: "," is %2C.
    assert all("[demonstration%2C not a judge]" in line for line in errors)
    assert all("%2C node " in line for line in errors)  # the blamed node beside the stage
