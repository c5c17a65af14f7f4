"""One ending for every run (run.ending.end_run): verify and a local batch job agree on the
report's `run` block, run.json's status and the loaded report's exit code; the run-end hooks
never fail nor hold a run. (The same contract on Ray: tests/batch/test_batch_ray.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import veritrail
from clikit import QUICKSTART, loopback_model_env, oracle_args
from runkit import CLAIMS, build_dag, responder
from veritrail.cli.main import cli
from veritrail.dag import save_dag
from veritrail.run import hooks
from veritrail.run.store import RUN_FILE
from veritrail.testing.fake_openai_server import FakeOpenAIServer, FaultKind

# Keys every run block has, whatever ran it; timings and paths differ by nature.
_VARYING = {"started", "finished", "wall_seconds", "run_dir", "batch"}


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def _run_json(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))


def _manifest(t: Path, **job: str) -> Path:
    path = t / "manifest.jsonl"
    path.write_text(json.dumps({"id": "job0", "out": "reports/job0.json", **job}) + "\n")
    return path


def _stable(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k not in _VARYING}


def test_verify_and_a_batch_job_end_alike_with_a_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = _invoke(*oracle_args(tmp_path, "--max-unsupported", "0.1"))
    assert code == 1, out
    manifest = _manifest(
        tmp_path,
        dag=str(QUICKSTART / "dag.json"),
        claims=str(QUICKSTART / "claims.json"),
        oracle=str(QUICKSTART / "oracle.json"),
    )
    code, out = _invoke("batch", str(manifest), "--max-unsupported", "0.1", "--quiet")
    assert code == 1, out

    verify_report = tmp_path / "report.json"
    batch_report = tmp_path / "reports" / "job0.json"
    v, b = (json.loads(p.read_text(encoding="utf-8")) for p in (verify_report, batch_report))
    assert _stable(v["run"]) == _stable(b["run"])
    assert v["run"]["max_unsupported"] == b["run"]["max_unsupported"] == 0.1
    assert veritrail.load_report(verify_report).exit_code == 1
    assert veritrail.load_report(batch_report).exit_code == 1  # was 0: no gate recorded
    batch_run = Path(b["run"]["run_dir"])
    assert _run_json(tmp_path / "run")["status"] == _run_json(batch_run)["status"] == "complete"


def test_errored_claims_mark_both_runs_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call answers 500 (retries cut short): the claims end in error, exit 3, and both
    verify's and the batch job's run.json say `incomplete` (a batch job said `complete`)."""
    monkeypatch.chdir(tmp_path)
    loopback_model_env(monkeypatch, no_prices=True)
    monkeypatch.setenv("VERITRAIL_RETRY_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("VERITRAIL_CACHE", "0")
    dag, claims = tmp_path / "dag.json", tmp_path / "claims.json"
    save_dag(build_dag(), dag)
    claims.write_text(json.dumps(CLAIMS), encoding="utf-8")
    with FakeOpenAIServer(responder, fault_rates={FaultKind.SERVER_ERROR: 1.0}) as srv:
        common = ["--model", "openai/loopback", "--base-url", srv.base_url]
        code, out = _invoke(
            "verify", str(dag), "--claims", str(claims), "--run-dir", str(tmp_path / "run"), *common
        )
        assert code == 3, out
        manifest = _manifest(tmp_path, dag=str(dag), claims=str(claims))
        code, out = _invoke("batch", str(manifest), "--quiet", *common)
        assert code == 3, out
    assert _run_json(tmp_path / "run")["status"] == "incomplete"
    job_runs = [p.parent for p in (tmp_path / "runs").glob(f"*/{RUN_FILE}")]
    assert job_runs and all(_run_json(p)["status"] == "incomplete" for p in job_runs)


def test_a_hanging_hook_does_not_hold_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    release = threading.Event()
    called = threading.Event()

    def hang(_event: hooks.RunEnded) -> None:
        called.set()
        release.wait(60)

    monkeypatch.setenv("VERITRAIL_HOOK_TIMEOUT", "0.2")
    monkeypatch.setattr(hooks, "_warned", set())
    hooks.register_run_end_hook("test hang", hang)
    try:
        code, out = _invoke(*oracle_args(tmp_path, "--quiet"))
    finally:
        hooks.unregister_run_end_hook("test hang")
        release.set()
    assert called.wait(30)
    assert code == 0, out  # as without the hook
    assert _run_json(tmp_path / "run")["status"] == "complete"
    warned = [ln for ln in (out + capsys.readouterr().err).splitlines() if "test hang" in ln]
    assert len(warned) == 1 and "did not answer within 0.2 s" in warned[0]


def test_a_failing_hook_warns_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(_event: hooks.RunEnded) -> None:
        raise ConnectionError("postgres at 127.0.0.1:1 refused the connection")

    monkeypatch.setattr(hooks, "_warned", set())
    hooks.register_run_end_hook("test boom", boom)
    outs = []
    try:
        for k in range(2):
            code, out = _invoke(*oracle_args(tmp_path / str(k), "--quiet"))
            assert code == 0, out
            outs.append(out)
    finally:
        hooks.unregister_run_end_hook("test boom")
    err = "".join(outs) + capsys.readouterr().err
    assert err.count("test boom") == 1 and "ConnectionError" in err


def test_an_oracle_verify_imports_no_sqlalchemy_nor_rapidfuzz(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from veritrail.cli.main import cli\n"
        f"args = {oracle_args(tmp_path)!r}\n"
        "res = CliRunner().invoke(cli, args)\n"
        "assert res.exit_code == 0, res.output\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'rapidfuzz'))\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, veritrail; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sqlalchemy" not in done.stdout and "rapidfuzz" not in done.stdout
