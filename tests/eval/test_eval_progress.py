"""`veritrail eval` shows progress as `verify` does (issue 19): items done per method, calls,
tokens, dollars, elapsed and time left."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.eval.runner import EvalProgress
from veritrail.lm.model import CallEvent

WICE_DEV = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "data"
    / "wice"
    / "data"
    / "entailment_retrieval"
    / "claim"
    / "dev.jsonl"
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_counts_items_per_method_calls_tokens_and_time_left() -> None:
    clock = Clock()
    p = EvalProgress(["veritrail:q=1", "direct"], 4, clock=clock)
    assert p.line().startswith("eval: veritrail:q=1 0/4, direct 0/4 · calls 0 (cache 0)")
    assert "left" not in p.line()  # no pace yet
    p.call(CallEvent("verdict", "c1", False, 1, 12_000, 300, 0.01, cached_input_tokens=9_000))
    p.call(CallEvent("verdict", "c1", True, 0, 500, 20, 0.0))
    p.call(CallEvent("verdict", "c2", False, 3, 0, 0, 0.0, error="TransientError: boom"))
    clock.now += 60
    p.item_done("veritrail:q=1", 1, 4)
    p.item_done("direct", 1, 4)
    line = p.line()
    assert "veritrail:q=1 1/4, direct 1/4" in line
    assert "calls 2 (cache 1, failed 1)" in line
    assert "tokens 12.5k in (9000 prompt-cached) / 320 out" in line
    assert "$0.0100" in line
    assert "1m00s elapsed" in line
    assert "~3m00s left" in line  # 2 of 8 (item, method) pairs in 60 s: 6 more take 180 s
    assert not p.finished()
    for m in ("veritrail:q=1", "direct"):
        p.item_done(m, 4, 4)
    assert p.finished() and "left" not in p.line()


@pytest.mark.slow
@pytest.mark.skipif(not WICE_DEV.is_file(), reason="shared/data not present")
def test_cli_eval_prints_progress_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["eval", str(WICE_DEV), "--limit", "2", "--format", "json", "--bootstrap", "10"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert res.stderr.strip().splitlines()[-1].startswith("eval: Oracle")
    assert " 2/2 · calls 0 (cache 0)" in res.stderr
    assert res.stdout.lstrip().startswith("{")  # results alone on stdout
    quiet = CliRunner().invoke(cli, [*args, "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
