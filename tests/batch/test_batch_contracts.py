"""`veritrail batch` keeps `verify`'s contracts (issue 29, items 1 and 5).

* Plugged steps (`decomposer`, `selector`, `judge`, from a manifest's settings or the
  environment) are applied by the batch as by `verify`, with the same reports; a spec that cannot
  be loaded, or an oracle together with a plugin, is exit 2 before any model call; a run that a
  batch started and `veritrail resume` finished has one judge's verdicts, not two.
* Outputs are checked before any model call: an `out` under a regular file, a report or an input
  that `batch-summary.json` / `batch-index.html` would overwrite are exit 2.
* An unreachable `--ray-address` fails fast with its cause (exit 3).

The loopback fake server answers the LM steps; its request log shows which steps called the LM.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from batchkit import QUICKSTART, claim_of, recorded_ids, responder, write_jobs
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.report import comparable
from veritrail.testing.fake_openai_server import FakeOpenAIServer, Fault

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "overlap_steps.py"
JUDGED_BY_PLUGIN = "of the claim's words found"
"""What the example judge writes in every reasoning (the LM judge never does)."""


def judged_by_the_plugin(report: dict[str, Any]) -> bool:
    """Every verdict of `report` that a judge gave is the plugin's (a claim with no evidence is
    Not Fully Supported without any judge), and there is one."""
    reasons = [c["reasoning"] for c in report["claims"]]
    lm_judged = [r for r in reasons if r.startswith("Judged ")]  # `runkit.responder`'s verdicts
    return not lm_judged and any(JUDGED_BY_PLUGIN in r for r in reasons)


SYSTEM_OF = {
    "decomposer": "You split factual",
    "selector": "You find evidence",
    "judge": "You judge",
}
"""The start of each LM step's system prompt (`runkit.responder` answers by it)."""

PLUGIN_OF = {
    "decomposer": f"{EXAMPLE}:AndDecomposer",
    "selector": f"{EXAMPLE}:OverlapSelector",
    "judge": f"{EXAMPLE}:make_judge",
}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("VERITRAIL_PRICES", "")
    for kind in PLUGIN_OF:
        monkeypatch.delenv(f"VERITRAIL_{kind.upper()}", raising=False)


def batch(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["batch", *args], catch_exceptions=False)
    return res.exit_code, res.output


def cli_run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def load(p: Path) -> dict[str, Any]:
    return json.loads(p.read_text())  # type: ignore[no-any-return]


def systems(srv: FakeOpenAIServer) -> set[str]:
    """The LM steps the server was asked for (by the start of their system prompts)."""
    got = set()
    for r in srv.requests:
        system = (r.get("messages") or [{}])[0].get("content", "")
        got.update(k for k, start in SYSTEM_OF.items() if system.startswith(start))
    return got


def lm(srv: FakeOpenAIServer) -> list[str]:
    return ["--model", "openai/fake", "--base-url", srv.base_url, "--cache", "off"]


# -- item 1: plugged steps -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["judge", "selector", "decomposer"])
def test_a_plugged_step_in_the_manifest_replaces_the_lm_step(tmp_path: Path, kind: str) -> None:
    manifest = write_jobs(tmp_path, 2, 3, settings={kind: PLUGIN_OF[kind]})
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = batch(str(manifest), *lm(srv), "--quiet")
        asked = systems(srv)
    assert code in (0, 1, 3) and "Traceback" not in out, out
    assert kind not in asked, f"the LM {kind} was called: the plugin was ignored"
    assert asked  # the other steps still went to the LM
    if kind == "judge":
        for k in range(2):
            report = load(tmp_path / "reports" / f"job{k}.json")
            assert judged_by_the_plugin(report)
    run = load(next((tmp_path / "runs").glob("*/run.json")))
    assert run["config"]["step_plugins"][kind]["spec"] == PLUGIN_OF[kind]


def test_a_judge_from_the_environment_gives_verify_s_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERITRAIL_JUDGE", PLUGIN_OF["judge"])
    manifest = write_jobs(tmp_path, 1, 4)
    job = json.loads(manifest.read_text())
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = batch(str(manifest), *lm(srv), "--quiet")
        assert code == 0, out
        vcode, vout = cli_run(
            "verify", job["dag"], "--claims", job["claims"], *lm(srv),
            "--run-dir", "verify-run", "--out", "verify.json", "--quiet",
        )  # fmt: skip
        assert vcode == 0, vout
        assert "judge" not in systems(srv)
    got = load(tmp_path / "reports" / "job0.json")
    assert comparable(got) == comparable(load(tmp_path / "verify.json"))
    assert judged_by_the_plugin(got)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"judge": "no_such_module_xyz:make_judge"}, "cannot import plugin module"),
        ({"selector": "missing/file.py:Sel"}, "does not exist"),
        ({"decomposer": f"{EXAMPLE}:NoSuchThing"}, "has no attribute"),
        ({"selector": f"{EXAMPLE}:OverlapJudge"}, "does not implement the selector protocol"),
    ],
)
def test_a_plugin_that_cannot_be_loaded_is_exit_2_before_any_call(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    manifest = write_jobs(tmp_path, 2, 2, settings=settings)
    # A job without a claims file too: its extraction calls must not be made either.
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    lines.append(dict(lines[0], id="extracts", claims=None, out="reports/extracts.json"))
    manifest.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = batch(str(manifest), *lm(srv))
        assert srv.count == 0
    assert code == 2, out
    assert "error: " in out and message in out and "Traceback" not in out
    assert "job job0" in out
    assert not (tmp_path / "runs").exists()  # no run was opened


def test_an_oracle_with_a_plugin_is_refused_as_verify_refuses_it(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 1, 0, oracle=True, settings={"judge": PLUGIN_OF["judge"]})
    code, out = batch(str(manifest))
    assert code == 2, out
    assert "answers every step" in out and "Traceback" not in out
    assert not (tmp_path / "runs").exists()


def test_resume_finishes_a_batch_run_with_the_same_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch leaves one claim in error (the server fails its calls); `veritrail resume`
    # finishes the job's run. Every verdict must come from the one judge of the run (before the
    # fix the batch's came from the LM and the resumed one from the plugin: one report, two
    # judges).
    monkeypatch.setenv("VERITRAIL_RETRY_MAX_ATTEMPTS", "1")
    failing = True

    def flaky(request: dict[str, Any]) -> Any:
        if failing and "Item 9" in claim_of(request):
            return Fault.server_error()
        return responder(request)

    # One claim per prompt: the server fails the calls of one claim (shared prompts would fail
    # its peers with it).
    manifest = write_jobs(
        tmp_path, 1, 6, settings={"judge": PLUGIN_OF["judge"], "claims_per_prompt": 1}
    )
    with FakeOpenAIServer(responder=flaky) as srv:
        code, out = batch(str(manifest), *lm(srv), "--quiet")
        assert code == 3, out
        (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
        failing = False
        code, out = cli_run("resume", str(run_dir), "--quiet")
        assert code == 0, out
        assert "judge" not in systems(srv)
    report = load(tmp_path / "reports" / "job0.json")
    assert len(report["claims"]) == 6
    assert judged_by_the_plugin(report)
    assert JUDGED_BY_PLUGIN in report["claims"][-1]["reasoning"] or report["claims"][-1][
        "reasoning"
    ].startswith("No evidence")  # the resumed claim
    assert sum(recorded_ids(tmp_path / "runs").values()) == 7  # the failed claim twice


# -- item 5: outputs checked before any call ------------------------------------------------------


def test_an_out_under_a_regular_file_is_exit_2_before_any_call(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 2, 2)
    (tmp_path / "afile").write_text("not a directory\n")
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    lines[1]["out"] = "afile/job1.json"
    manifest.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with FakeOpenAIServer(responder=responder) as srv:
        code, out = batch(str(manifest), *lm(srv))
        assert srv.count == 0
    assert code == 2, out
    assert "error: " in out and "afile" in out and "not a directory" in out
    assert "Traceback" not in out
    assert (tmp_path / "afile").read_text() == "not a directory\n"


def test_a_report_named_like_the_summary_is_exit_2(tmp_path: Path) -> None:
    manifest = write_jobs(tmp_path, 1, 0, oracle=True)
    line = json.loads(manifest.read_text())
    for name in ("batch-summary.json", "sum/batch-index.json"):
        line["out"] = name  # its .html beside it is batch-index.html in the second case
        manifest.write_text(json.dumps(line) + "\n")
        summary_dir = "." if name.startswith("batch") else "sum"
        code, out = batch(str(manifest), "--html", "--summary-dir", summary_dir)
        assert code == 2, out
        assert "error: " in out and "batch-" in out and "Traceback" not in out
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("which", ["claims", "dag", "manifest-summary", "manifest-index"])
def test_an_input_named_like_the_summary_is_never_overwritten(tmp_path: Path, which: str) -> None:
    summary = tmp_path / "summary"
    summary.mkdir()
    line: dict[str, Any] = {
        "id": "demo",
        "dag": str(QUICKSTART / "dag.json"),
        "claims": str(QUICKSTART / "claims.json"),
        "oracle": str(QUICKSTART / "oracle.json"),
        "out": "reports/demo.json",
    }
    manifest = tmp_path / "manifest.jsonl"
    if which in ("claims", "dag"):
        taken = summary / "batch-summary.json"
        taken.write_bytes(Path(line[which]).read_bytes())
        line[which] = str(taken)
    else:
        name = "batch-summary.json" if which == "manifest-summary" else "batch-index.html"
        manifest = summary / name
        taken = manifest
    manifest.write_text(json.dumps(line) + "\n")
    before = taken.read_bytes()
    code, out = batch(str(manifest), "--summary-dir", str(summary))
    assert code == 2, out
    assert "error: " in out and taken.name in out and "Traceback" not in out
    assert taken.read_bytes() == before
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_ray_address_fails_fast_with_its_cause(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manifest = write_jobs(tmp_path, 1, 0, oracle=True)
    t0 = time.monotonic()
    code, out = batch(str(manifest), "--executor", "ray", "--ray-address", f"127.0.0.1:{port}")
    took = time.monotonic() - t0
    assert code == 3, out
    assert "error: " in out and f"127.0.0.1:{port}" in out and "Traceback" not in out
    assert took < 60, f"took {took:.0f} s"
    assert not (tmp_path / "runs").exists()  # refused before any run was opened


@pytest.mark.heavy
def test_the_ray_executor_applies_a_plugged_judge(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    manifest = write_jobs(tmp_path, 2, 3, settings={"judge": PLUGIN_OF["judge"]})
    with FakeOpenAIServer(responder=responder) as srv:
        # One claim per prompt: shared groups follow a Ray shard's boundaries and the reports are
        # compared with their costs (docs/method.md#shared-prompts).
        common = [*lm(srv), "--quiet", "--concurrency", "2", "--claims-per-prompt", "1"]
        code, out = batch(str(manifest), *common, "--runs-dir", "runs-local")
        assert code in (0, 1), out
        local = {p.name: comparable(load(p)) for p in (tmp_path / "reports").glob("*.json")}
        code, out = batch(
            str(manifest), *common, "--executor", "ray", "--workers", "1", "--runs-dir",
            "runs-ray",
        )  # fmt: skip
        assert code in (0, 1), out
        assert "judge" not in systems(srv)
    ray_reports = {p.name: comparable(load(p)) for p in (tmp_path / "reports").glob("*.json")}
    assert ray_reports == local
    for report in ray_reports.values():
        assert judged_by_the_plugin(report)
