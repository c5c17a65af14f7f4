"""Red team (issue 40, high): an output may never name a run directory's own files, and
`--run-dir` on a directory that is not a run never writes over the user's files. Through the
CLI, exit 2 before any model call; every file is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clikit import QUICKSTART, oracle_args
from veritrail.cli.main import cli


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


@pytest.mark.parametrize("name", ["run.json", "results.jsonl", ".lock", "claims.json"])
@pytest.mark.parametrize("flag", ["--junit", "--sarif"])
def test_verify_refuses_a_ci_output_that_is_a_run_file(
    tmp_path: Path, flag: str, name: str
) -> None:
    code, out = _invoke(*oracle_args(tmp_path))  # a finished run to resume
    assert code == 0, out
    run = tmp_path / "run"
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    code, out = _invoke(*oracle_args(tmp_path, flag, str(run / name)))
    assert code == 2, out
    assert f"is the run's own {name}" in out and "Traceback" not in out
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_check_refuses_a_ci_output_in_its_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "checkrun"
    args = [
        "check",
        str(QUICKSTART.parent / "check" / "answer.txt"),
        str(QUICKSTART.parent / "check" / "sources" / "*.txt"),
        "--model",
        "demo/overlap",
        "--run-dir",
        str(run),
        "--out",
        str(tmp_path / "r.json"),
    ]
    code, out = _invoke(*args, "--sarif", str(run / "results.jsonl"))
    assert code == 2, out
    assert "is the run's own results.jsonl" in out


def test_batch_refuses_a_ci_output_that_is_a_job_s_run_file(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    run = tmp_path / "jobrun"
    job = {
        "id": "j",
        "dag": str(QUICKSTART / "dag.json"),
        "claims": str(QUICKSTART / "claims.json"),
        "oracle": str(QUICKSTART / "oracle.json"),
        "out": str(tmp_path / "j.json"),
        "run_dir": str(run),
    }
    manifest.write_text(json.dumps(job) + "\n")
    code, out = _invoke("batch", str(manifest), "--junit", str(run / "run.json"))
    assert code == 2, out
    assert "is the run's own run.json" in out


@pytest.mark.parametrize("name", ["report.json", "results.jsonl", "claims.json"])
def test_run_dir_that_is_not_a_run_keeps_the_user_s_files(tmp_path: Path, name: str) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / name).write_text("my own file\n")
    args = oracle_args(tmp_path)
    args[args.index("--run-dir") + 1] = str(mine)
    code, out = _invoke(*args)
    assert code == 2, out
    assert "is not a run directory" in out and name in out
    assert (mine / name).read_text() == "my own file\n"
    assert not (mine / "run.json").exists()


def test_an_empty_or_new_run_dir_is_fine(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for d in ("empty", "new"):
        args = oracle_args(tmp_path / d)
        args[args.index("--run-dir") + 1] = str(tmp_path / d)
        code, out = _invoke(*args)
        assert code == 0, out


def test_a_run_killed_before_its_run_json_resumes(tmp_path: Path) -> None:
    """The lock is taken before any file is written, then claims.json, then run.json: a run
    killed in between left a lock file and claims.json, and the same command goes on."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text("")
    (run / "claims.json").write_text("[]\n")
    code, out = _invoke(*oracle_args(tmp_path))
    assert code == 0, out
    assert (run / "run.json").is_file()
