"""`veritrail batch` with the local executor: manifests, exit codes, outputs, resume.

Runs in-process (click's CliRunner) in tmp_path, with the oracle or the loopback fake server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batchkit import QUICKSTART, recorded_ids, responder, write_jobs
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.report import comparable
from veritrail.testing.fake_openai_server import FakeOpenAIServer, Fault


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("VERITRAIL_PRICES", "")


def batch(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["batch", *args], catch_exceptions=False)
    return res.exit_code, res.output


def load(p: Path) -> dict[str, Any]:
    return json.loads(p.read_text())  # type: ignore[no-any-return]


def test_oracle_batch_equals_verify_and_writes_summary(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 3, 0, oracle=True)
    code, out = batch(str(manifest), "--html", "--summary-dir", "summary")
    assert code == 0, out
    for k in range(3):
        vcode = (
            CliRunner()
            .invoke(
                cli,
                [
                    "verify",
                    str(QUICKSTART / "dag.json"),
                    "--claims",
                    str(QUICKSTART / "claims.json"),
                    "--oracle",
                    str(QUICKSTART / "oracle.json"),
                    "-q",
                    str(1 + k % 3),
                    "--run-dir",
                    str(tmp_path / f"verify-run{k}"),
                    "--out",
                    str(tmp_path / f"verify{k}.json"),
                    "--quiet",
                ],
            )
            .exit_code
        )
        assert vcode == 0
        got = load(tmp_path / "reports" / f"job{k}.json")
        assert comparable(got) == comparable(load(tmp_path / f"verify{k}.json"))
        assert (tmp_path / "reports" / f"job{k}.html").exists()
        assert got["run"]["batch"] == {"job": f"job{k}", "executor": "local"}
    doc = load(tmp_path / "summary" / "batch-summary.json")
    assert doc["format"] == "veritrail-batch-summary" and doc["exit_code"] == 0
    assert [j["id"] for j in doc["jobs"]] == ["job0", "job1", "job2"]
    assert doc["totals"]["claims"] == 12 and doc["totals"]["complete"] == 3
    index = (tmp_path / "summary" / "batch-index.html").read_text()
    assert 'href="../reports/job0.html"' in index
    assert "job0" in out and "exit status 0" in out


def test_batch_job_is_the_run_verify_makes(tmp_path: Path) -> None:
    # One fingerprint definition (run.fingerprint.result_config): the same inputs and settings
    # give the same run directory, so a batch finishes (here: reuses) what `veritrail verify`
    # started.
    args = [
        "--claims",
        str(QUICKSTART / "claims.json"),
        "--oracle",
        str(QUICKSTART / "oracle.json"),
    ]
    res = CliRunner().invoke(
        cli,
        ["verify", str(QUICKSTART / "dag.json"), *args, "-q", "1", "--out", "v.json", "--quiet"],
    )
    assert res.exit_code == 0, res.output
    # The runs directory holds the run and the index of runs (`veritrail runs`).
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    manifest = write_jobs(tmp_path, 1, 0, oracle=True)  # job0 has q = 1
    code, out = batch(str(manifest), "--quiet")
    assert code == 0, out
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()] == [run_dir.name]
    report = load(tmp_path / "reports" / "job0.json")
    assert report["run"]["resumed_claims"] == 4  # nothing verified again


def test_gate_and_rerun_is_free(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 0, oracle=True)
    # The quickstart has 1 of 4 claims Not Fully Supported: 25% > 10% → gate fails, exit 1.
    code, out = batch(str(manifest), "--max-unsupported", "0.1")
    assert code == 1, out
    assert "FAILED" in out
    before = recorded_ids(tmp_path / "runs")
    code, out = batch(str(manifest), "--max-unsupported", "0.3")
    assert code == 0, out
    assert recorded_ids(tmp_path / "runs") == before  # nothing verified twice
    assert set(before.values()) == {1}


@pytest.mark.slow
def test_fake_server_batch_resumes_errored_claims(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 4)
    with FakeOpenAIServer(responder=responder) as srv:
        srv.inject(*[Fault.server_error()] * 40)  # more than the retries of the first claims
        # One claim per prompt: the 40 faults are spread over the first run's many calls (a
        # shared prompt's failure ends every claim of its group, and the fewer shared calls would
        # leave faults over for the second run).
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]
        common += ["--claims-per-prompt", "1"]
        code, out = batch(str(manifest), *common, "--concurrency", "2")
        doc = load(tmp_path / "batch-summary.json")
        assert code in (0, 3), out
        if code == 3:  # claims that met the 500s ended in error; the next run retries them
            assert doc["totals"]["errors"] > 0
        code2, out2 = batch(str(manifest), *common, "--concurrency", "4")
        assert code2 == 0, out2
    doc = load(tmp_path / "batch-summary.json")
    assert doc["totals"]["claims"] == 4 + 5 and doc["totals"]["errors"] == 0
    rep = load(tmp_path / "reports" / "job1.json")
    assert [c["verdict"] for c in rep["claims"]][-1] == "Not Fully Supported"
    assert all(c["verdict"] == "Fully Supported" for c in rep["claims"][:-1])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not JSON"),
        ('{"id": "a", "dag": "d.json", "out": "o.json"}', '"claims" is required'),
        ('{"id": "a", "dag": "d.json", "claims": null, "out": "o.json", "x": 1}', "x"),
        (
            '{"id": "a", "dag": "d.json", "claims": null, "out": "o.json", "settings": {"qq": 1}}',
            "unknown setting(s) qq",
        ),
        (
            '{"id": "a", "dag": "d.json", "claims": null, "out": "o.json", '
            '"settings": {"concurrency": 9}}',
            "whole batch",
        ),
        ('{"id": "a b", "dag": "d.json", "claims": null, "out": "o.json"}', "id"),
        ('{"id": "a", "dag": "missing.json", "claims": null, "out": "o.json"}', "missing.json"),
    ],
)
def test_bad_manifest_exits_2(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "m.jsonl").write_text(line + "\n")
    code, out = batch("m.jsonl")
    assert code == 2
    assert out.startswith("error: ") and message in out
    assert "Traceback" not in out
    assert not (tmp_path / "runs").exists()


def test_outputs_checked_up_front(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 3)
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    dag_bytes = Path(lines[0]["dag"]).read_bytes()
    # out = an input of another job
    bad = [dict(lines[0], out=lines[1]["claims"]), lines[1]]
    (tmp_path / "m1.jsonl").write_text("\n".join(json.dumps(x) for x in bad))
    code, out = batch("m1.jsonl", "--model", "openai/fake", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "is an input" in out
    # two jobs writing the same report; duplicate id; the manifest itself as an output
    dup = [lines[0], dict(lines[1], out=lines[0]["out"])]
    (tmp_path / "m2.jsonl").write_text("\n".join(json.dumps(x) for x in dup))
    code, out = batch("m2.jsonl", "--model", "openai/fake", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "also written by job job0" in out
    same = [lines[0], dict(lines[0], id="again", out="other.json")]
    (tmp_path / "m3.jsonl").write_text("\n".join(json.dumps(x) for x in same))
    code, out = batch("m3.jsonl", "--model", "openai/fake", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "same run directory" in out
    me = [dict(lines[0], out=str(tmp_path / "m4.jsonl"))]
    (tmp_path / "m4.jsonl").write_text(json.dumps(me[0]))
    code, out = batch("m4.jsonl", "--model", "openai/fake", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "is an input" in out
    assert Path(lines[0]["dag"]).read_bytes() == dag_bytes
    assert not (tmp_path / "runs").exists()
    code, out = batch(str(manifest), "--max-unsupported", "1.5")
    assert code == 2 and "--max-unsupported" in out


def test_ray_executor_without_ray_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    manifest = write_jobs(tmp_path, 1, 0, oracle=True)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    code, out = batch(str(manifest), "--executor", "ray")
    assert code == 2 and "pip install 'veritrail[ray]'" in out
    assert not (tmp_path / "runs").exists()
