"""A run directory never overwrites the run's own inputs (issue 29, item 2).

The run keeps `run.json`, `claims.json`, `results.jsonl`, `report.json`, `partial-report.json`
and `.lock` in its run directory (and `dag.json` for a DAG given in memory). An input file the
user gave that is one of those files — `--run-dir .` beside a DAG named `report.json`, a claims
file named `claims.json` — is refused before any model call: exit 2, one `error:` line naming
the file, the file untouched. `verify`, `resume` and `batch` (a manifest's `"run_dir"`) alike.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runkit import responder
from veritrail.cli.main import cli
from veritrail.testing.fake_openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("VERITRAIL_PRICES", "")


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def copy_inputs(d: Path, dag: str = "dag.json", claims: str = "c.json") -> tuple[Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    dag_path, claims_path = d / dag, d / claims
    shutil.copy(QUICKSTART / "dag.json", dag_path)
    shutil.copy(QUICKSTART / "claims.json", claims_path)
    return dag_path, claims_path


def lm(srv: FakeOpenAIServer) -> list[str]:
    return ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]


@pytest.mark.parametrize(
    ("dag", "claims", "taken"),
    [
        ("report.json", "c.json", "report.json"),  # the case: the DAG became the report
        ("dag.json", "claims.json", "claims.json"),
        ("run.json", "c.json", "run.json"),
        ("dag.json", "results.jsonl", "results.jsonl"),
        ("partial-report.json", "c.json", "partial-report.json"),
    ],
)
def test_verify_refuses_a_run_dir_holding_an_input_under_a_run_file_name(
    tmp_path: Path, dag: str, claims: str, taken: str
) -> None:
    dag_path, claims_path = copy_inputs(tmp_path / "work", dag, claims)
    before = {p: p.read_bytes() for p in (dag_path, claims_path)}
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = run(
            "verify", str(dag_path), "--claims", str(claims_path), *lm(srv),
            "--run-dir", str(tmp_path / "work"), "--out", str(tmp_path / "out.json"),
        )  # fmt: skip
        assert srv.count == 0
    assert code == 2, out
    assert out.startswith("error: ") and taken in out and "Traceback" not in out
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "work" / ".lock").exists()


def test_run_dir_dot_refuses_claims_json_and_takes_the_same_inputs_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The issue's `--run-dir .` beside a claims file named claims.json; once renamed, the same
    # command runs: `dag.json` is the run's own file only for a DAG given in memory, so a DAG
    # file of that name beside its run is fine.
    dag_path, claims_path = copy_inputs(tmp_path / "work", "dag.json", "claims.json")
    monkeypatch.chdir(tmp_path / "work")
    before = {p: p.read_bytes() for p in (dag_path, claims_path)}
    with FakeOpenAIServer(responder=responder) as srv:
        args = [*lm(srv), "--run-dir", ".", "--out", "out.json", "--quiet"]
        code, out = run("verify", "dag.json", "--claims", "claims.json", *args)
        assert srv.count == 0
        assert code == 2, out
        assert out.startswith("error: ") and "claims.json" in out and "Traceback" not in out
        assert {p: p.read_bytes() for p in before} == before
        claims_path.rename(tmp_path / "work" / "c.json")
        code, out = run("verify", "dag.json", "--claims", "c.json", *args)
    assert code in (0, 1), out
    assert dag_path.read_bytes() == before[dag_path]
    assert (tmp_path / "work" / "run.json").is_file()


def test_resume_refuses_a_run_whose_dag_is_a_run_file(tmp_path: Path) -> None:
    # A run made before the check: its DAG is the run directory's report.json, which finishing
    # the run would replace with the report.
    dag_path, claims_path = copy_inputs(tmp_path / "in")
    rdir = tmp_path / "run"
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = run(
            "verify", str(dag_path), "--claims", str(claims_path), *lm(srv),
            "--run-dir", str(rdir), "--out", str(tmp_path / "out.json"), "--quiet",
        )  # fmt: skip
        assert code in (0, 1), out
        shutil.move(str(dag_path), rdir / "report.json")
        doc = json.loads((rdir / "run.json").read_text())
        doc["inputs"]["dag"]["path"] = str(rdir / "report.json")
        (rdir / "run.json").write_text(json.dumps(doc))
        before = (rdir / "report.json").read_bytes()
        srv.reset_counters()
        code, out = run("resume", str(rdir), "--out", str(tmp_path / "again.json"))
        assert srv.count == 0
    assert code == 2, out
    assert out.startswith("error: ") and "report.json" in out and "Traceback" not in out
    assert (rdir / "report.json").read_bytes() == before


@pytest.mark.parametrize(("dag", "claims"), [("report.json", "c.json"), ("d.json", "claims.json")])
def test_batch_refuses_a_manifest_run_dir_holding_an_input(
    tmp_path: Path, dag: str, claims: str
) -> None:
    dag_path, claims_path = copy_inputs(tmp_path / "work", dag, claims)
    before = {p: p.read_bytes() for p in (dag_path, claims_path)}
    job: dict[str, Any] = {
        "id": "j",
        "dag": dag,
        "claims": claims,
        "out": str(tmp_path / "reports" / "j.json"),
        "run_dir": ".",
    }
    manifest = tmp_path / "work" / "manifest.jsonl"
    manifest.write_text(json.dumps(job) + "\n")
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = run("batch", str(manifest), *lm(srv))
        assert srv.count == 0
    assert code == 2, out
    taken = dag if dag == "report.json" else claims
    assert "error: " in out and taken in out and "Traceback" not in out
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "work" / "run.json").exists()


def test_an_out_that_is_a_run_file_is_refused(tmp_path: Path) -> None:
    dag_path, claims_path = copy_inputs(tmp_path / "in")
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = run(
            "verify", str(dag_path), "--claims", str(claims_path), *lm(srv),
            "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "run" / "run.json"),
        )  # fmt: skip
        assert srv.count == 0
    assert code == 2, out
    assert out.startswith("error: ") and "run.json" in out and "Traceback" not in out
