"""Each job of a batch renders with its own `prompt_dir` (the prompt directory is a context
variable of the run, not a process-wide setting): two jobs in one event loop, one with an
override of the evidence prompt and one without, each send their own prompts. The Ray executor's
shards do the same (tests/batch/test_batch_ray.py, heavy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.method.prompting import prompt_dir, prompt_source
from veritrail.testing.fake_openai_server import FakeOpenAIServer
from veritrail.testing.overlap import responder

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
MARK = "Prompt variant zebra-quartz."


def override_dir(tmp_path: Path) -> Path:
    """A prompt directory whose evidence template's system section carries `MARK`."""
    d = tmp_path / "prompts-a"
    d.mkdir()
    text = prompt_source("evidence").replace("## system\n", f"## system\n{MARK}\n", 1)
    (d / "evidence.md").write_text(text, encoding="utf-8")
    return d


def two_jobs(tmp_path: Path, prompts: Path) -> Path:
    jobs = [
        {
            "id": job_id,
            "dag": str(QUICKSTART / "dag.json"),
            "claims": str(QUICKSTART / "claims.json"),
            "out": str(tmp_path / "reports" / f"{job_id}.json"),
            "settings": settings,
        }
        for job_id, settings in (
            # The same work; the prompt directory alone sets them apart (and their runs: the
            # overrides are part of the run's fingerprint).
            # One claim per prompt in both: job a's override of the one-claim evidence prompt
            # makes its evidence step ask per claim anyway (method.sharing.honours_overrides).
            ("a", {"prompt_dir": str(prompts), "claims_per_prompt": 1}),
            ("b", {"claims_per_prompt": 1}),
        )
    ]
    m = tmp_path / "manifest.jsonl"
    m.write_text("".join(json.dumps(j) + "\n" for j in jobs), encoding="utf-8")
    return m


def evidence_prompts(requests: list[dict[str, Any]]) -> list[str]:
    """The system prompts of the evidence-selection calls."""
    out = []
    for r in requests:
        system = next((m["content"] for m in r["messages"] if m["role"] == "system"), "")
        if system.startswith("You find evidence") or MARK in system:
            out.append(system)
    return out


def batch_args(tmp_path: Path, srv: FakeOpenAIServer, manifest: Path) -> list[str]:
    return [
        "batch", str(manifest), "--model", "openai/fake", "--base-url", srv.base_url,
        "--cache", "off", "--runs-dir", str(tmp_path / "runs"),
        "--summary-dir", str(tmp_path), "--quiet",
    ]  # fmt: skip


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("VERITRAIL_PRICES", "")
    monkeypatch.delenv("VERITRAIL_PROMPT_DIR", raising=False)


def test_each_job_of_a_local_batch_uses_its_own_prompt_dir(tmp_path: Path) -> None:
    prompts = override_dir(tmp_path)
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(cli, batch_args(tmp_path, srv, two_jobs(tmp_path, prompts)))
        requests = srv.requests
    assert res.exit_code == 0, res.output
    systems = evidence_prompts(requests)
    marked = [s for s in systems if MARK in s]
    # The two jobs do the same work (the word-overlap model answers both alike): job a's
    # evidence calls, all marked, are exactly half of them; job b sent none marked.
    assert marked and len(systems) == 2 * len(marked), (len(systems), len(marked))
    runs = {
        json.loads((d / "run.json").read_text())["extra"]["batch_job"]: d
        for d in (tmp_path / "runs").iterdir()
        if d.is_dir()
    }
    assert set(runs) == {"a", "b"}


def test_prompt_dir_is_scoped(tmp_path: Path) -> None:
    prompts = override_dir(tmp_path)
    plain = prompt_source("evidence")
    with prompt_dir(prompts):
        assert MARK in prompt_source("evidence")
        with prompt_dir(None):  # None keeps the current choice
            assert MARK in prompt_source("evidence")
    assert prompt_source("evidence") == plain


def test_a_bad_prompt_dir_of_one_job_is_refused_before_any_call(tmp_path: Path) -> None:
    bad = tmp_path / "prompts-bad"
    bad.mkdir()
    (bad / "evidnce.md").write_text("## user\nx\n", encoding="utf-8")  # misspelt name
    m = two_jobs(tmp_path, bad)
    with FakeOpenAIServer(responder=responder) as srv:
        res = CliRunner().invoke(cli, batch_args(tmp_path, srv, m))
        assert srv.requests == []
    assert res.exit_code == 2, res.output
    assert "job a" in res.output and "evidnce.md" in res.output
