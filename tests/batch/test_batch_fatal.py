"""A fatal endpoint error stops a batch (local executor): issue 14's contract for `batch`.

HTTP 401 from the loopback fake server: no claim starts after the first refusal, in any job on
that endpoint; finished claims are kept; exit 3; the cause printed once with the status and the
endpoint, never the key; the same command after the fix verifies what is left.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batchkit import QUICKSTART, responder, write_jobs
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.run.store import RESULTS_FILE
from veritrail.testing.fake_openai_server import FakeOpenAIServer, Fault

KEY = "sk-batch-fatal-key-0123456789"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("VERITRAIL_PRICES", "")


def batch(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["batch", *args], catch_exceptions=False)
    return res.exit_code, res.output


def with_oracle_job(manifest: Path) -> None:
    """Add a job answered by its oracle: another "endpoint", which must not be stopped."""
    job = {
        "id": "oracle-job",
        "dag": str(QUICKSTART / "dag.json"),
        "claims": str(QUICKSTART / "claims.json"),
        "oracle": str(QUICKSTART / "oracle.json"),
        "out": "reports/oracle.json",
    }
    with manifest.open("a") as fh:
        fh.write(json.dumps(job) + "\n")


def results(runs: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for f in sorted(runs.glob(f"*/{RESULTS_FILE}"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]


def test_401_stops_every_job_on_the_endpoint_and_never_writes_the_key(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 3, 3)  # 3 + 4 + 5 claims on one endpoint
    with_oracle_job(manifest)
    with FakeOpenAIServer(responder=lambda req: Fault.unauthorized(echo_key=True)) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]
        code, out = batch(str(manifest), *common, "--concurrency", "2", "--html")
        requests = srv.count
        url = srv.base_url
    assert code == 3, out
    assert requests <= 2  # the budget: no request after the first refusal, in any job
    # (A traceback of ours would have been raised: catch_exceptions=False. The fake server's
    # threads may print one to stderr when the client closes a connection it no longer needs.)
    fatal = [x for x in out.splitlines() if "the endpoint refused the run" in x]
    assert len(fatal) == 1, out  # printed once for the whole batch
    assert "401" in fatal[0] and url in fatal[0]
    assert KEY not in out
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix in {".json", ".jsonl", ".html"}:
            assert KEY not in f.read_text(errors="replace"), f
    doc = json.loads((tmp_path / "batch-summary.json").read_text())
    assert len(doc["fatal"]) == 1 and "401" in doc["fatal"][0]
    by_id = {j["id"]: j for j in doc["jobs"]}
    assert by_id["oracle-job"]["errors"] == 0 and by_id["oracle-job"]["status"] == "complete"
    got = [r for r in results(tmp_path / "runs") if r["termination"] == "error"]
    # Every claim on the endpoint is an error naming the cause (all had started: no claim limit;
    # those waiting for a slot of the budget were refused without a request), retried next run.
    assert len(got) == 3 + 4 + 5
    assert all("401" in r["error"] and KEY not in r["error"] for r in got)
    report = json.loads((tmp_path / "reports" / "job0.json").read_text())
    assert "401" in report["run"]["fatal"]
    # Fixed endpoint: the same command verifies every claim that ended in error.
    with FakeOpenAIServer(responder=responder) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]
        code, out = batch(str(manifest), *common, "--concurrency", "2")
    assert code == 0, out
    doc = json.loads((tmp_path / "batch-summary.json").read_text())
    assert doc["totals"]["errors"] == 0 and "fatal" not in doc


def test_key_revoked_mid_batch_keeps_finished_claims(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 3)  # 3 + 4 claims
    runs = tmp_path / "runs"
    revoked = {"on": True}

    def key_revoked_after_first_claim(req: dict[str, Any]) -> str | Fault:
        # One claim at a time over the whole batch: once a claim is saved, the key stops working.
        if revoked["on"] and results(runs):
            return Fault.unauthorized()
        return responder(req)

    with FakeOpenAIServer(responder=key_revoked_after_first_claim) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]
        code, out = batch(str(manifest), *common, "--max-parallel-claims", "1")
        assert code == 3, out
        assert "HTTP 401" in out and "No further claim was started" in out
        lines = results(runs)
        assert len(lines) == 3 + 4
        finished = [d for d in lines if d["termination"] != "error"]
        assert len(finished) == 1
        not_started = [d for d in lines if (d["error"] or "").startswith("not started: ")]
        assert len(not_started) == 3 + 4 - 2  # the one in flight failed, the rest waited
        revoked["on"] = False
        code, out = batch(str(manifest), *common)
    assert code == 0, out
    doc = json.loads((tmp_path / "batch-summary.json").read_text())
    assert doc["totals"]["errors"] == 0 and doc["totals"]["claims"] == 7
    # The claim finished before the refusal was kept, not verified again.
    ids = [json.loads(x)["id"] for f in runs.glob(f"*/{RESULTS_FILE}") for x in f.open()]
    assert len(ids) == 7 + 6  # first run: 7 lines; second: only the 6 errored claims again


def test_progress_lines_per_job(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 2)
    with FakeOpenAIServer(responder=responder) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]
        code, out = batch(str(manifest), *common)
    assert code == 0, out
    # Not a terminal: plain lines (the last one at the end), overall then per job.
    prog = [x for x in out.splitlines() if x.startswith("[veritrail] ")]
    assert any("5/5 claims (100%)" in x and "calls " in x and "tokens " in x for x in prog), out
    assert any("jobs 2/2 done" in x for x in prog), out
    assert "job job0: 2 claims, report " in out


def test_extraction_refused_exits_3_with_one_message(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 2)
    jobs = [json.loads(x) for x in manifest.read_text().splitlines()]
    jobs[1]["claims"] = None  # claims extracted from the final output: refused by the endpoint
    manifest.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    with FakeOpenAIServer(responder=lambda req: Fault.unauthorized(echo_key=True)) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]
        code, out = batch(str(manifest), *common)
    assert code == 3, out
    assert KEY not in out  # no traceback of ours: it would be raised (catch_exceptions=False)
    line = next(x for x in out.splitlines() if "claims could not be extracted" in x)
    assert line.startswith("error: job job1: ") and "401" in line
