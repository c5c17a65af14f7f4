"""One `VerifyConfig` per run: the job builds it once, after fitting it to the model's context
window, and the partial report (written on an interruption) and the final report record that same
object (issue 15: they used to differ, the partial one recording the config before fitting)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from runkit import CLAIMS, build_dag, responder
from veritrail.lm import registry
from veritrail.lm.base import Message
from veritrail.lm.fake import FakeProvider
from veritrail.method.config import VerifyConfig
from veritrail.records import Claim
from veritrail.run.job import (
    InMemoryDag,
    RunState,
    job_settings,
    prepare_job,
    record_interruption,
    run_job,
)
from veritrail.run.progress import make_progress

WINDOW = 4096


class _WindowedFake(FakeProvider):
    """The scripted provider with a declared context window, so the run fits its config."""

    context_window = WINDOW


def _answer(messages: Sequence[Message]) -> str:
    return responder({"messages": [{"role": m.role, "content": m.content} for m in messages]})


def _factory(model: str, **options: Any) -> FakeProvider:
    return _WindowedFake(model=model, responder=_answer, **options)


def test_partial_and_final_report_carry_the_same_fitted_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry._PROVIDERS, "windowed", _factory)
    monkeypatch.chdir(tmp_path)
    settings = job_settings({"model": "windowed/x", "cache": "off"}, config_path=None)
    job = prepare_job(
        dag=InMemoryDag(build_dag()),
        claims=[Claim(f"c{i}", text) for i, text in enumerate(CLAIMS)],
        oracle_path=None,
        settings=settings,
        run_dir=tmp_path / "run",
        out_path=None,
        html=None,
    )
    state = RunState()
    progress = make_progress(quiet=True, interval=job.settings.progress_interval)
    try:
        final = asyncio.run(run_job(job, progress, state, handle_sigterm=False))
        # What an interruption at the very end writes: the partial report of every claim.
        got = record_interruption(job, state)
    finally:
        assert state.store is not None
        state.store.unlock()
    assert got is not None and got.partial_report is not None
    partial = json.loads(got.partial_report.read_text(encoding="utf-8"))
    assert partial["run"]["partial"] is True
    assert partial["config"] == final["config"]
    # The one config is the fitted one: the unset token limits come from the window, so this
    # test fails if either report records the settings before fitting.
    assert final["config"]["verdict_tokens"] is not None
    assert final["config"]["verdict_tokens"] < WINDOW
    assert VerifyConfig().verdict_tokens is None
    assert state.config is not None and final["config"]["q"] == state.config.q
