"""Durable runs end to end: `veritrail verify` as a subprocess against the loopback fake OpenAI
server, killed with SIGKILL mid-run, then finished by `veritrail resume` (or by re-running the
same command). The final report must equal an uninterrupted run's (`report.comparable`), and the
server's request log proves that no answered model call was made twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runkit import CLAIMS, build_dag, extracting_responder, fenced, responder
from veritrail.dag import save_dag
from veritrail.report import comparable, read_report
from veritrail.run.store import RESULTS_FILE, RUN_FILE
from veritrail.testing.fake_openai_server import FakeOpenAIServer

CONCURRENCY = 2
LATENCY = 0.12


def body_key(req: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()


# The child gets Python's Ctrl-C handler back: a test run started as a background job of a
# non-interactive shell (`nohup ... &`, a CI wrapper) passes SIGINT on as ignored, as POSIX has
# background jobs do, and Python then keeps ignoring it. A user's Ctrl-C reaches a foreground
# process, which is what these tests stand for.
CHILD = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from veritrail.cli.main import main; main()"
)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", CHILD, *args]


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    save_dag(build_dag(), tmp_path / "dag.json")
    (tmp_path / "claims.json").write_text(json.dumps(CLAIMS))
    return {"dag": tmp_path / "dag.json", "claims": tmp_path / "claims.json", "tmp": tmp_path}


def verify_args(p: dict[str, Path], srv: FakeOpenAIServer, name: str) -> list[str]:
    t = p["tmp"]
    return cli(
        "verify",
        str(p["dag"]),
        "--claims",
        str(p["claims"]),
        "--model",
        "openai/fake-model",
        "--base-url",
        srv.base_url,
        "--run-dir",
        str(t / f"run-{name}"),
        "--cache",
        str(t / f"cache-{name}.sqlite"),
        "--out",
        str(t / f"report-{name}.json"),
        "--concurrency",
        str(CONCURRENCY),
        "--max-parallel-claims",
        "2",
        "-q",
        "2",
        # One claim per prompt: these tests kill a run between claims and compare its costs with an
        # uninterrupted run's, and which claims share a prompt depends on timing
        # (docs/method.md#shared-prompts).
        "--claims-per-prompt",
        "1",
    )


ENV = {**os.environ, "OPENAI_API_KEY": "sk-test", "VERITRAIL_PRICES": ""}


def run_to_end(args: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def kill_mid_run(args: list[str], results: Path, *, min_done: int) -> int:
    """Start the run, SIGKILL it once `min_done` claims are saved; returns claims saved by then."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if results.exists() and results.read_text().count("\n") >= min_done:
                break
            assert proc.poll() is None, (
                f"run ended before it could be killed: {proc.stderr.read()!r}"
            )  # type: ignore[union-attr]
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return results.read_text().count("\n")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["resume", "same-command"])
def test_kill_then_resume_equals_uninterrupted_run(setup: dict[str, Path], how: str) -> None:
    t = setup["tmp"]
    with FakeOpenAIServer(responder=responder, latency=LATENCY) as srv:
        run_to_end(verify_args(setup, srv, "ref"))
        reference = read_report(t / "report-ref.json")
        ref_requests = srv.requests
        srv.reset_counters()

        args = verify_args(setup, srv, "killed")
        saved = kill_mid_run(args, t / "run-killed" / RESULTS_FILE, min_done=2)
        assert 2 <= saved < len(CLAIMS)
        run_json = json.loads((t / "run-killed" / RUN_FILE).read_text())
        assert run_json["status"] == "running"  # killed: no chance to say otherwise
        # A request whose body the kill cut off arrives empty: it was never really made.
        first_part = [r for r in srv.requests if r.get("messages")]
        srv.reset_counters()

        if how == "resume":
            proc = run_to_end(cli("resume", str(t / "run-killed")))
        else:
            proc = run_to_end(args)
        resumed_part = srv.requests

    assert f"verifying {len(CLAIMS) - saved} claims ({saved} already finished" in proc.stderr
    final = read_report(t / "report-killed.json")
    assert comparable(final) == comparable(reference)
    assert final["run"]["resumed_claims"] == saved

    # Same work, nothing asked twice: every request of the killed + resumed runs is one the
    # uninterrupted run made, and a request repeats only if it was still in flight at the kill
    # (its reply never reached the cache); at most CONCURRENCY requests can be in flight.
    ref_keys = Counter(body_key(r) for r in ref_requests)
    got = Counter(body_key(r) for r in first_part + resumed_part)
    assert set(got) == set(ref_keys)
    repeats = sum(n - 1 for n in got.values() if n > 1)
    assert repeats <= CONCURRENCY
    assert len(first_part) + len(resumed_part) <= len(ref_requests) + CONCURRENCY
    # The resumed part asked only for what was not answered before the kill.
    assert not (
        Counter(body_key(r) for r in resumed_part)
        & Counter(body_key(r) for r in first_part[:-CONCURRENCY])
    )


@pytest.mark.slow
def test_second_run_of_a_finished_command_makes_no_request(setup: dict[str, Path]) -> None:
    with FakeOpenAIServer(responder=responder) as srv:
        run_to_end(verify_args(setup, srv, "a"))
        first = read_report(setup["tmp"] / "report-a.json")
        n = srv.count
        again = run_to_end(verify_args(setup, srv, "a"))
        assert srv.count == n
    assert "verifying 0 claims (8 already finished" in again.stderr
    assert comparable(read_report(setup["tmp"] / "report-a.json")) == comparable(first)


def test_resume_rejects_changed_dag(setup: dict[str, Path]) -> None:
    from click.testing import CliRunner

    from veritrail.cli.main import cli as vt

    t = setup["tmp"]
    oracle = {
        "claims": [
            {"claim": c, "evidence": {"m0": [0]}, "verdicts": ["Fully Supported"]} for c in CLAIMS
        ]
    }
    (t / "oracle.json").write_text(json.dumps(oracle))
    runner = CliRunner()
    args = [
        "verify",
        str(setup["dag"]),
        "--claims",
        str(setup["claims"]),
        "--oracle",
        str(t / "oracle.json"),
        "--run-dir",
        str(t / "run"),
        "--out",
        str(t / "r.json"),
        "--quiet",
    ]
    assert runner.invoke(vt, args).exit_code == 0
    assert runner.invoke(vt, ["resume", str(t / "run"), "--quiet"]).exit_code == 0
    setup["dag"].write_text(setup["dag"].read_text().replace("Chunk 0", "Chunk zero"))
    got = runner.invoke(vt, ["resume", str(t / "run")])
    assert got.exit_code == 2 and "changed since the run started" in got.output
    got = runner.invoke(vt, args)  # same command, other DAG bytes: another run, same --run-dir
    assert got.exit_code == 2 and "holds a different run" in got.output


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_message_and_status(setup: dict[str, Path], sig: signal.Signals) -> None:
    """Ctrl-C (SIGINT) or SIGTERM stops cleanly: status `interrupted`, finished claims kept and
    shown in a partial report, and a resume hint.

    Deterministic: the server answers the first two claims and holds every request of the
    others until the signal has been sent, so the run cannot finish first however loaded the
    machine is."""
    t = setup["tmp"]
    gate = threading.Event()
    held = threading.Event()

    def gated(request: dict[str, Any]) -> str:
        msgs = request.get("messages") or []
        claim = fenced(msgs[-1]["content"], "claim") if msgs else ""
        statement = fenced(msgs[-1]["content"], "statement") if msgs else ""
        if not any(f"Item {i} costs" in claim + statement for i in (0, 1)):
            held.set()
            gate.wait(timeout=120)  # held until the signal is sent
        return responder(request)

    with FakeOpenAIServer(responder=gated) as srv:
        args = verify_args(setup, srv, "int")
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
        )
        try:
            results = t / "run-int" / RESULTS_FILE
            deadline = time.monotonic() + 120
            # Waiting for a condition, not racing the work: the other claims cannot finish.
            while time.monotonic() < deadline and not (
                results.exists() and results.read_text().count("\n") >= 1
            ):
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                time.sleep(0.02)
            # A request of a held claim has arrived: the run is certainly still working.
            assert held.wait(timeout=60)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert f"Resume with:  veritrail resume {t / 'run-int'}" in err
    assert "Traceback" not in err
    doc = json.loads((t / "run-int" / RUN_FILE).read_text())
    assert doc["status"] == "interrupted"
    saved = (t / "run-int" / RESULTS_FILE).read_text().count("\n")
    partial = read_report(t / "run-int" / "partial-report.json")
    assert len(partial["claims"]) == saved >= 1 and partial["run"]["partial"] is True
    assert saved < len(CLAIMS)
    assert f"{saved} of {len(CLAIMS)} claims are finished" in err
    assert "sk-test" not in (t / "run-int" / RUN_FILE).read_text()


@pytest.mark.slow
def test_extracted_claims_are_kept_in_the_run_directory(setup: dict[str, Path]) -> None:
    t = setup["tmp"]
    with FakeOpenAIServer(responder=extracting_responder) as srv:
        args = [
            a for a in verify_args(setup, srv, "x") if a not in ("--claims", str(setup["claims"]))
        ]
        run_to_end(args)
        claims = json.loads((t / "run-x" / "claims.json").read_text())
        assert [c["text"] for c in claims] == [
            "All items were sold.",
            "Item 3 costs 4 dollars.",
            "Item 9 was lost.",
        ]
        assert [c["sentence_indices"] for c in claims] == [[0], [1], [2]]
        n = srv.count
        assert (
            sum(
                1
                for r in srv.requests
                if (r.get("response_format") or {}).get("json_schema", {}).get("name")
                == "claim_selection_batch"
            )
            == 1  # the batched form: one selection call for the three sentences
        )
        again = run_to_end(args)
        assert srv.count == n  # neither extraction nor verification asked again
    assert "verifying 0 claims (3 already finished" in again.stderr
    assert "calls 0 (cache 0)" in again.stderr  # claims.json reused: no extraction call at all
    report = read_report(t / "report-x.json")
    assert [c["verdict"] for c in report["claims"]] == [
        "Not Fully Supported",
        "Fully Supported",
        "Not Fully Supported",
    ]


def test_bad_oracle_fails_before_a_run_directory_exists(setup: dict[str, Path]) -> None:
    from click.testing import CliRunner

    from veritrail.cli.main import cli as vt

    t = setup["tmp"]
    (t / "oracle.json").write_text('{"claims": "not a list"}')
    args = ["verify", str(setup["dag"]), "--claims", str(setup["claims"]), "--oracle", str(t / "oracle.json"),
            "--run-dir", str(t / "run")]  # fmt: skip
    got = CliRunner().invoke(vt, args)
    assert got.exit_code == 2 and "error:" in got.output
    assert not (t / "run").exists()
