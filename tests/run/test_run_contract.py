"""The run contract of `veritrail verify` / `veritrail resume` (issue 14), through the CLI:
exit codes, the `--max-unsupported` gate, errored claims retried, fatal endpoint errors, outputs
checked up front and written atomically, race-free run directories, no secret written anywhere,
honest progress and summaries.

HTTP goes to the loopback fake server; everything is written under tmp_path (the autouse fixture
in conftest.py also makes it the current directory).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from clikit import oracle_args
from runkit import CLAIMS, build_dag, extracting_responder, responder
from veritrail.cli.main import cli
from veritrail.dag import save_dag
from veritrail.report import read_report
from veritrail.run.dryrun import aligned_table
from veritrail.run.progress import error_cause, stage_rows, summary_tables
from veritrail.run.store import RESULTS_FILE, RUN_FILE
from veritrail.testing.fake_openai_server import FakeOpenAIServer, Fault

ROOT = Path(__file__).resolve().parents[2]
QS = ROOT / "examples" / "quickstart"
KEY = "sk-contract-test-key-0123456789"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("VERITRAIL_PRICES", "")
    save_dag(build_dag(), tmp_path / "dag.json")
    (tmp_path / "claims.json").write_text(json.dumps(CLAIMS))
    return {"dag": tmp_path / "dag.json", "claims": tmp_path / "claims.json", "tmp": tmp_path}


def model_args(p: dict[str, Path], base_url: str, *extra: str) -> list[str]:
    t = p["tmp"]
    return [
        "verify",
        str(p["dag"]),
        "--claims",
        str(p["claims"]),
        "--model",
        "openai/fake-model",
        "--base-url",
        base_url,
        "--run-dir",
        str(t / "run"),
        "--cache",
        str(t / "cache.sqlite"),
        "--out",
        str(t / "report.json"),
        "--concurrency",
        "2",
        "-q",
        "2",
        *extra,
    ]


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# -- exit codes and errored claims ------------------------------------------------------------


@pytest.mark.slow  # >= 5 s on 2 cores: out of the fast tier
def test_endpoint_down_exits_3_then_fixed_endpoint_retries_only_errored_claims(
    inputs: dict[str, Path],
) -> None:
    t = inputs["tmp"]
    down = closed_port_url()
    got = invoke(*model_args(inputs, down, "--quiet"))
    assert got.exit_code == 3, got.output
    assert "Traceback" not in got.output
    # Grouped by cause: one line for all eight claims, naming the endpoint.
    assert f"error: {len(CLAIMS)} of {len(CLAIMS)} claims could not be verified" in got.output
    line = next(x for x in got.output.splitlines() if x.startswith(f"  {len(CLAIMS)} claims: "))
    assert "127.0.0.1" in line
    assert json.loads((t / "run" / RUN_FILE).read_text())["status"] == "incomplete"
    assert read_report(t / "report.json")["summary"]["verdicts"]["error"] == len(CLAIMS)

    with FakeOpenAIServer(responder=responder) as srv:
        fixed = invoke(*model_args(inputs, srv.base_url))
        assert fixed.exit_code == 0, fixed.output
        assert f"verifying {len(CLAIMS)} claims" in fixed.output
        n = srv.count
        # Everything finished: the same command again sends nothing and verifies nothing.
        again = invoke(*model_args(inputs, srv.base_url))
        assert again.exit_code == 0 and srv.count == n
        assert f"verifying 0 claims ({len(CLAIMS)} already finished" in again.output
    report = read_report(t / "report.json")
    assert report["summary"]["verdicts"]["error"] == 0
    assert len(report["claims"]) == len(CLAIMS)
    # results.jsonl only grows: the old error lines stay, the last line per claim wins.
    lines = (t / "run" / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 2 * len(CLAIMS)


def test_fatal_401_stops_the_run_keeps_finished_claims_and_never_writes_the_key(
    inputs: dict[str, Path],
) -> None:
    t = inputs["tmp"]
    with FakeOpenAIServer(
        responder=lambda req: Fault.unauthorized(echo_key=True), latency=0.05
    ) as srv:
        got = invoke(*model_args(inputs, srv.base_url, "--html", str(t / "report.html")))
        requests = srv.count
        url = srv.base_url
    assert got.exit_code == 3, got.output
    assert requests <= 2  # the concurrency: no claim started after the first 401
    assert "Traceback" not in got.output
    fatal = next(x for x in got.output.splitlines() if "the endpoint refused the run" in x)
    assert "401" in fatal and url in fatal
    # The key the server echoed is nowhere: terminal, reports, run files.
    assert KEY not in got.output
    for f in [t / "report.json", t / "report.html", *(t / "run").iterdir()]:
        if f.is_file():
            assert KEY not in f.read_text(encoding="utf-8", errors="replace"), f
    # Fixed key/endpoint: the same run verifies every claim (none had finished).
    with FakeOpenAIServer(responder=responder) as srv:
        fixed = invoke(*model_args(inputs, srv.base_url))
    assert fixed.exit_code == 0, fixed.output
    assert read_report(t / "report.json")["summary"]["verdicts"]["error"] == 0


def test_fatal_after_some_claims_keeps_them_and_resume_retries_the_rest(
    inputs: dict[str, Path],
) -> None:
    t = inputs["tmp"]
    results = t / "run" / RESULTS_FILE
    revoked = {"on": True}

    def key_revoked_after_first_claim(req: dict[str, Any]) -> str | Fault:
        # One claim at a time: once the first claim is saved, the key stops working.
        if revoked["on"] and results.exists() and results.read_text().count("\n") >= 1:
            return Fault.unauthorized()
        return responder(req)

    with FakeOpenAIServer(responder=key_revoked_after_first_claim) as srv:
        got = invoke(*model_args(inputs, srv.base_url, "--max-parallel-claims", "1"))
        assert got.exit_code == 3, got.output
        assert "HTTP 401" in got.output and "No further claim was started" in got.output
        lines = [json.loads(x) for x in results.read_text().splitlines()]
        finished = [d["id"] for d in lines if d["termination"] != "error"]
        assert len(finished) == 1 and len(lines) == len(CLAIMS)
        not_started = [d for d in lines if (d["error"] or "").startswith("not started: ")]
        assert len(not_started) == len(CLAIMS) - 2  # the one in flight failed, the rest waited
        revoked["on"] = False
        res = invoke("resume", str(t / "run"))
        assert res.exit_code == 0, res.output
        assert f"verifying {len(CLAIMS) - 1} claims (1 already finished in the run store" in (
            res.output
        )
    report = read_report(t / "report.json")
    assert report["summary"]["verdicts"]["error"] == 0 and len(report["claims"]) == len(CLAIMS)


def test_gate_max_unsupported(tmp_path: Path) -> None:
    ok = invoke(*oracle_args(tmp_path, "--max-unsupported", "0.25", "--quiet"))
    assert ok.exit_code == 0, ok.output
    nfs = [
        c["id"]
        for c in read_report(tmp_path / "report.json")["claims"]
        if c["verdict"] == "Not Fully Supported"
    ]
    assert len(nfs) == 1  # 1 of 4: 25% is not above 0.25
    gate = invoke(*oracle_args(tmp_path, "--max-unsupported", "0.2", "--quiet"))
    assert gate.exit_code == 1
    assert "gate failed: 1 of 4 claims (25.0%) are Not Fully Supported" in gate.output
    assert f"  {nfs[0]}: " in gate.output
    # resume takes the flag too; otherwise the setting of the command that created the run.
    assert invoke("resume", str(tmp_path / "run"), "--quiet").exit_code == 0  # 0.25
    res = invoke("resume", str(tmp_path / "run"), "--max-unsupported", "0.1")
    assert res.exit_code == 1 and "gate failed" in res.output


@pytest.mark.parametrize("rate", ["1.5", "-0.1", "nan", "lots"])
def test_gate_rate_out_of_range_is_a_usage_error(tmp_path: Path, rate: str) -> None:
    got = invoke(*oracle_args(tmp_path, "--max-unsupported", rate))
    assert got.exit_code == 2
    assert not (tmp_path / "run").exists()


def test_help_documents_exit_codes() -> None:
    for cmd in ("verify", "resume"):
        text = invoke(cmd, "--help").output
        assert "--max-unsupported" in text and "130 interrupted" in text


# -- outputs --------------------------------------------------------------------------------


def test_outputs_are_checked_before_anything_runs(tmp_path: Path) -> None:
    dag = tmp_path / "dag.json"
    dag.write_bytes((QS / "dag.json").read_bytes())
    before = dag.read_bytes()
    base = [
        "verify",
        str(dag),
        "--claims",
        str(QS / "claims.json"),
        "--oracle",
        str(QS / "oracle.json"),
        "--run-dir",
        str(tmp_path / "run"),
    ]
    cases = {
        "input": ["--out", str(dag)],
        "input via another spelling": ["--out", str(tmp_path / "x" / ".." / "dag.json")],
        "claims as html": ["--out", str(tmp_path / "r.json"), "--html", str(QS / "claims.json")],
        "same": ["--out", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.json")],
        "html dir": ["--out", str(tmp_path / "r.json"), "--html", str(tmp_path)],
        "parent is a file": ["--out", str(dag / "r.json")],
        "unwritable": ["--out", "/proc/veritrail-cannot-exist/r.json"],
    }
    os.symlink(dag, tmp_path / "link.json")
    cases["symlink to the input"] = ["--out", str(tmp_path / "link.json")]
    for name, extra in cases.items():
        got = invoke(*base, *extra)
        assert got.exit_code == 2, (name, got.output)
        assert got.output.startswith("error: ") and "Traceback" not in got.output, name
        assert dag.read_bytes() == before, name
        assert not (tmp_path / "run").exists(), name
    # A missing parent directory is created up front.
    got = invoke(*base, "--out", str(tmp_path / "new" / "dir" / "r.json"), "--quiet")
    assert got.exit_code == 0, got.output
    assert read_report(tmp_path / "new" / "dir" / "r.json")["summary"]["claims"] == 4
    # Atomic writes leave no temporary file behind.
    leftovers = [p.name for p in (tmp_path / "new" / "dir").iterdir()]
    assert leftovers == ["r.json"]
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]


# -- run directories ------------------------------------------------------------------------


@pytest.mark.slow
def test_identical_runs_started_at_once_never_traceback(tmp_path: Path) -> None:
    args = [
        sys.executable,
        "-c",
        "from veritrail.cli.main import main; main()",
        *oracle_args(tmp_path, "--quiet"),
    ]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    outcomes = []
    for p in procs:
        _, err = p.communicate(timeout=240)
        outcomes.append((p.returncode, err))
    for code, err in outcomes:
        assert "Traceback" not in err, err
        assert code in (0, 2), err
        if code == 2:
            assert "is being run by another veritrail process" in err, err
    assert any(code == 0 for code, _ in outcomes)
    assert read_report(tmp_path / "report.json")["summary"]["claims"] == 4
    assert json.loads((tmp_path / "run" / RUN_FILE).read_text())["status"] == "complete"


def test_credentials_in_base_url_are_never_stored_or_printed(
    inputs: dict[str, Path],
) -> None:
    t = inputs["tmp"]
    password = "hunter2-very-secret"
    with FakeOpenAIServer(responder=responder) as srv:
        url = srv.base_url.replace("http://", f"http://alice:{password}@")
        dry = invoke(*model_args(inputs, url, "--dry-run"))
        assert dry.exit_code == 0, dry.output
        assert password not in dry.output and "alice" not in dry.output
        got = invoke(*model_args(inputs, url))
        assert got.exit_code == 0, got.output
        assert password not in got.output
        for f in (t / "run").iterdir():
            assert password not in f.read_text(encoding="utf-8"), f
        run_json = json.loads((t / "run" / RUN_FILE).read_text())
        assert run_json["config"]["base_url"].startswith("http://***@127.0.0.1")
        # resume needs the credentials again (they were never stored) ...
        (t / "run" / "results.jsonl").write_text("")
        need = invoke("resume", str(t / "run"))
        assert need.exit_code == 2 and "--base-url" in need.output
        # ... and takes them; the fingerprint did not depend on them.
        res = invoke("resume", str(t / "run"), "--base-url", url)
        assert res.exit_code == 0, res.output


# -- progress and summaries ----------------------------------------------------------------


def test_extraction_progress_and_cost_table_agree(inputs: dict[str, Path]) -> None:
    with FakeOpenAIServer(responder=extracting_responder) as srv:
        args = model_args(inputs, srv.base_url)
        i = args.index("--claims")
        del args[i : i + 2]
        got = invoke(*args)
    assert got.exit_code == 0, got.output
    assert "extracting claims from the final output" in got.output
    last = [x for x in got.output.splitlines() if x.startswith("[veritrail] ") and "claims (" in x]
    figures = last[-1].split(" · calls ")[1]
    calls = int(figures.split(" ")[0])
    cached = int(figures.split("(cache ")[1].split(")")[0].split(",")[0])
    assert calls - cached == srv.count  # fresh cache: the rest went to the server
    row = next(x for x in got.output.splitlines() if x.startswith("│ model calls"))
    assert int(row.split("│")[2].strip().replace(",", "")) == calls
    assert any(x.startswith("│ of which claim extraction") for x in got.output.splitlines())


def test_dry_run_table_keeps_large_numbers_apart() -> None:
    big = "1,234,567,890"
    lines = aligned_table(
        ("", "lower", "estimate", "upper"), [("input tokens", [big, big, big]), ("x", ["1"] * 3)]
    )
    assert f"{big}  {big}  {big}" in lines[1]
    assert len({len(x) for x in lines}) == 1


def test_deep_chain_summary_prints_a_few_stage_rows() -> None:
    per_stage = {k: 1 for k in range(1, 200_001, 7)}
    per_stage[5] = 40
    rows = stage_rows(per_stage, 200_000)
    assert len(rows) == 11 and ("5", "40") in rows
    assert rows[-1][0] == f"{200_000 - 10:,} more stages"
    assert int(rows[-1][1]) == sum(per_stage.values()) - sum(int(c) for _, c in rows[:-1])
    report = {
        "format": "veritrail-report",
        "version": 3,
        "model": "oracle",
        "config": {},
        "summary": {
            "claims": 1,
            "verdicts": {"Not Fully Supported": 1},
            "error_stages": {str(k): v for k, v in per_stage.items()},
            "cost": {"lm_calls": 0, "input_tokens": 0, "output_tokens": 0, "dollars": 0.0},
        },
        "dag": {
            "max_stage": 200_000,
            "nodes": 200_001,
            "terminal": "n200000",
            "nodes_per_stage": {},
            "nodes_touched": [],
        },
        "claims": [],
    }
    from rich.console import Console

    buf = Console(file=__import__("io").StringIO(), width=100)
    buf.print(summary_tables(report))
    assert buf.file.getvalue().count("\n") < 60


def test_error_causes_group_without_per_claim_detail() -> None:
    a = error_cause("TransientError: cannot connect to http://h/v1 (connection refused)")
    b = error_cause("not started: cannot connect to http://h/v1 (connection refused)")
    assert a == b == "cannot connect to http://h/v1 (connection refused)"
    assert error_cause("ValueError: bad\nTraceback (most recent call last):\n ...") == "bad"
    assert KEY not in error_cause(f"FatalError: HTTP 401: Incorrect API key provided: {KEY}")
