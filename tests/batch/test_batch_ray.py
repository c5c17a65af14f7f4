"""`veritrail batch --executor ray` on a local Ray cluster (2 CPUs, one session per module).

Heavy: starting Ray and its workers takes seconds. Checks that the Ray executor gives the same
reports as the local one (oracle and loopback fake server), that a worker killed in the middle
of a task is retried without duplicates, and that a killed driver resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batchkit import HeldResponder, recorded_ids, responder, write_jobs
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.report import comparable
from veritrail.testing.fake_openai_server import FakeOpenAIServer

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.heavy

ENV = {"OPENAI_API_KEY": "sk-test", "VERITRAIL_PRICES": "", "VERITRAIL_CACHE": "0"}


@pytest.fixture(scope="module")
def ray_session() -> Iterator[str]:
    """One local Ray for the module; workers inherit the test environment set here."""
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=80 * 1024 * 1024,
        logging_level="WARNING",
        log_to_driver=False,
    )
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def batch(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["batch", "--quiet", *args], catch_exceptions=False)
    return res.exit_code, res.output


def reports(d: Path) -> dict[str, Any]:
    return {p.name: comparable(json.loads(p.read_text())) for p in sorted(d.glob("*.json"))}


def test_ray_equals_local_with_the_oracle(ray_session: str, here: Path) -> None:
    manifest = write_jobs(here, 3, 0, oracle=True)
    code, out = batch(str(manifest), "--runs-dir", "runs-local")
    assert code == 0, out
    local = reports(here / "reports")
    code, out = batch(
        str(manifest), "--executor", "ray", "--runs-dir", "runs-ray", "--shard-size", "1"
    )
    assert code == 0, out
    assert reports(here / "reports") == local
    doc = json.loads((here / "batch-summary.json").read_text())
    assert doc["executor"] == "ray" and doc["ray"]["tasks"] == 12  # 3 jobs x 4 claims, 1 each


def test_ray_equals_local_with_the_fake_server(ray_session: str, here: Path) -> None:
    manifest = write_jobs(here, 2, 5)
    with FakeOpenAIServer(responder=responder) as srv:
        # One claim per prompt: which claims share a prompt depends on a shard's boundaries and
        # on timing (docs/method.md#shared-prompts), and this test compares costs call for call.
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--concurrency", "4"]
        common += ["--claims-per-prompt", "1"]
        code, out = batch(str(manifest), *common, "--runs-dir", "runs-local")
        assert code == 0, out
        local = reports(here / "reports")
        calls_local = srv.count
        code, out = batch(
            str(manifest), *common, "--executor", "ray", "--runs-dir", "runs-ray",
            "--shard-size", "2",
        )  # fmt: skip
        assert code == 0, out
    assert reports(here / "reports") == local
    assert srv.count == 2 * calls_local  # the same calls again, no cache: nothing extra
    assert set(recorded_ids(here / "runs-ray").values()) == {1}


def test_worker_killed_mid_task_is_retried_without_duplicates(ray_session: str, here: Path) -> None:
    from veritrail.batch import LocalExecutor, RayExecutor, load_manifest, prepare_jobs, run_batch

    manifest = write_jobs(here, 2, 3, oracle=True)
    entries = load_manifest(manifest)
    jobs = prepare_jobs(manifest, entries, flags={}, config_path=None, html=False)
    marker = str(here / "crashed-once")

    def crash_first_attempt() -> None:
        # Runs in the worker after it received its inputs; O_EXCL makes exactly one task win.
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)

    ex = RayExecutor(workers=2, concurrency=4, shard_size=2, hook=crash_first_attempt)
    res = run_batch(jobs, ex, manifest=str(manifest), summary_dir=here / "ray", concurrency=4)
    assert Path(marker).exists()
    assert res.exit_code == 0, res.summary
    assert res.summary["ray"]["failures"] == []
    got = reports(here / "reports")
    counts = recorded_ids(here / "runs")
    assert sum(counts.values()) == 8 and set(counts.values()) == {1}
    for d in (here / "runs").iterdir():
        if d.is_dir():  # the runs directory also holds the index of runs
            (d / "report.json").unlink()
    jobs2 = prepare_jobs(
        manifest, entries, flags={"runs_dir": "runs2"}, config_path=None, html=False
    )
    run_batch(
        jobs2,
        LocalExecutor(concurrency=4),
        manifest=str(manifest),
        summary_dir=here / "local",
        concurrency=4,
    )
    assert reports(here / "reports") == got


def test_driver_killed_then_same_command_resumes(ray_session: str, here: Path) -> None:
    manifest = write_jobs(here, 2, 4)
    held = HeldResponder("Item 9")  # the last claim of each job waits for release()
    with FakeOpenAIServer(responder=held) as srv:
        args = [
            sys.executable, "-c", "from veritrail.cli.main import main; main()",
            "batch", str(manifest), "--executor", "ray", "--ray-address", ray_session,
            "--model", "openai/fake", "--base-url", srv.base_url, "--shard-size", "3",
            "--concurrency", "8", "--quiet", "--claims-per-prompt", "1",
        ]  # fmt: skip
        env = {**os.environ, **ENV}
        proc = subprocess.Popen(args, cwd=here, env=env, stderr=subprocess.PIPE, text=True)
        expected = (4 - 1) + (5 - 1)  # every claim but the held ones
        deadline = time.monotonic() + 120
        try:
            while sum(recorded_ids(here / "runs").values()) < expected:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "claims were not recorded"
                time.sleep(0.05)
            assert sum(recorded_ids(here / "runs").values()) == expected
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert not (here / "reports").exists()
        held.release()
        again = subprocess.run(args, cwd=here, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-3000:]
    counts = recorded_ids(here / "runs")
    assert sum(counts.values()) == 4 + 5 and set(counts.values()) == {1}
    ray_reports = reports(here / "reports")
    assert len(ray_reports) == 2
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = batch(
            str(manifest), "--model", "openai/fake", "--base-url", srv.base_url,
            "--runs-dir", "runs-local", "--claims-per-prompt", "1",
        )  # fmt: skip
        assert code == 0, out
    # One claim per prompt in both: a held claim would hold the claims sharing its prompt, and
    # the comparison is of costs, call for call.
    assert reports(here / "reports") == ray_reports


def test_401_stops_the_ray_batch(ray_session: str, here: Path) -> None:
    from veritrail.testing.fake_openai_server import Fault

    manifest = write_jobs(here, 2, 5)  # 5 + 6 claims = 6 shards of 2 (one of 1)
    with FakeOpenAIServer(responder=lambda req: Fault.unauthorized(echo_key=True)) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--concurrency", "4"]
        res = CliRunner().invoke(
            cli,
            ["batch", str(manifest), *common, "--executor", "ray", "--workers", "2",
             "--shard-size", "2"],
            catch_exceptions=False,
        )  # fmt: skip
        requests = srv.count
        url = srv.base_url
    assert res.exit_code == 3, res.output
    fatal = [x for x in res.output.splitlines() if "the endpoint refused the run" in x]
    assert len(fatal) == 1 and "401" in fatal[0] and url in fatal[0], res.output
    assert ENV["OPENAI_API_KEY"] not in res.output
    doc = json.loads((here / "batch-summary.json").read_text())
    # With one task per shard this was `tasks == 2`: the first shards were refused and the
    # driver started no other. Now each worker is first fed shards until it holds 2 x its
    # 2 calls in claims and 2 shards (`FEED_FACTOR`, `FEED_SHARDS`): shards of 2, 2, 1, 2, 2 of
    # the 6 at most, before any answer; the rest are refused by the driver, never submitted.
    # Each worker's shared model layer sends nothing after its first refusal: 2 workers x 2
    # calls in flight at most.
    assert doc["ray"]["tasks"] <= 5 and doc["ray"]["shards_refused"] >= 1
    assert doc["ray"]["tasks"] + doc["ray"]["shards_refused"] == 6 and requests <= 4
    assert doc["totals"]["errors"] == 5 + 6 and len(doc["fatal"]) == 1
    lines = [
        json.loads(x)
        for f in (here / "runs").glob("*/results.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert len(lines) == 11 and all(d["termination"] == "error" for d in lines)
    assert sum(d["error"].startswith("not started: ") for d in lines) >= 11 - 4
    with FakeOpenAIServer(responder=responder) as srv:
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--concurrency", "4"]
        code, out = batch(str(manifest), *common, "--executor", "ray", "--shard-size", "2")
    assert code == 0, out


def test_many_small_jobs_share_each_workers_budget_and_never_exceed_it(
    ray_session: str, here: Path
) -> None:
    # 6 jobs of 3-8 claims, shards of 2: each worker runs several shards (of several jobs) at
    # once over one model layer; the calls in flight never exceed --concurrency.
    manifest = write_jobs(here, 6, 3)
    with FakeOpenAIServer(responder=responder) as srv:
        # One claim per prompt: which claims share a prompt depends on a shard's boundaries and
        # on timing (docs/method.md#shared-prompts), and this test compares costs call for call.
        common = ["--model", "openai/fake", "--base-url", srv.base_url, "--concurrency", "4"]
        common += ["--claims-per-prompt", "1"]
        code, out = batch(str(manifest), *common, "--runs-dir", "runs-local")
        assert code == 0, out
        local = reports(here / "reports")
        srv.reset_counters()
        code, out = batch(
            str(manifest), *common, "--executor", "ray", "--workers", "2", "--runs-dir",
            "runs-ray", "--shard-size", "2",
        )  # fmt: skip
        assert code == 0, out
        assert 0 < srv.max_in_flight <= 4
    assert reports(here / "reports") == local
    doc = json.loads((here / "batch-summary.json").read_text())
    assert doc["ray"]["tasks"] == sum((3 + k + 1) // 2 for k in range(6))  # every shard once
    assert doc["ray"]["failures"] == [] and doc["ray"]["worker_cpu_seconds"] > 0
    assert set(recorded_ids(here / "runs-ray").values()) == {1}


def test_each_job_on_ray_uses_its_own_prompt_dir(ray_session: str, here: Path) -> None:
    """Two jobs whose shards share the workers' event loops, one with prompt overrides: each
    shard renders with its own job's directory (as the local executor: test_prompt_dirs.py)."""
    from test_prompt_dirs import MARK, batch_args, evidence_prompts, override_dir, two_jobs

    from veritrail.testing.overlap import responder as overlap

    manifest = two_jobs(here, override_dir(here))
    with FakeOpenAIServer(responder=overlap) as srv:
        args = batch_args(here, srv, manifest)[1:]  # `batch` itself is added by `batch()`
        code, out = batch(*args, "--executor", "ray", "--ray-address", ray_session)
        systems = evidence_prompts(srv.requests)
    assert code == 0, out
    marked = [s for s in systems if MARK in s]
    assert marked and len(systems) == 2 * len(marked), (len(systems), len(marked))


def test_a_ray_job_ends_as_verify_ends(ray_session: str, here: Path) -> None:
    """The run contract (tests/run/test_run_ending.py) on Ray: a job's report records the gate it
    applied, so the loaded report's exit code is the batch's, and run.json says `complete`."""
    import veritrail
    from veritrail.run.store import RUN_FILE

    manifest = write_jobs(here, 1, 0, oracle=True)
    code, out = batch(
        str(manifest), "--executor", "ray", "--runs-dir", "runs-ray", "--max-unsupported", "0.1"
    )
    assert code == 1, out
    report = here / "reports" / "job0.json"
    doc = json.loads(report.read_text())
    assert doc["run"]["max_unsupported"] == 0.1 and doc["run"]["batch"]["executor"] == "ray"
    assert veritrail.load_report(report).exit_code == 1
    run_json = json.loads((Path(doc["run"]["run_dir"]) / RUN_FILE).read_text())
    assert run_json["status"] == "complete"
