"""`veritrail eval` shows progress as `verify` does (issue 19): items done per method, calls,
tokens, dollars, elapsed and time left; the time left counted in model calls per method, paced
from the model's first answer (issue 43), tested on a fake clock with counted calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.detectors.base import Detection
from veritrail.display import fmt_duration
from veritrail.eval.datasets import EvalDataset, EvalItem, GoldClaim, claim_key
from veritrail.eval.runner import EvalProgress, run_eval
from veritrail.lm.model import CallEvent
from veritrail.records import Verdict

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


def test_progress_line_counts_items_per_method_calls_tokens_and_elapsed() -> None:
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
    # Fed outside run_eval, no call is known to be a method's: no basis for a time left.
    assert "left" not in line
    assert not p.finished()
    for m in ("veritrail:q=1", "direct"):
        p.item_done(m, 4, 4)
    assert p.finished() and "left" not in p.line()


# -- the time left, with a fake clock and counted calls --------------------------------------

START_UP = 40.0
"""Seconds the fake model takes to start (inside its first call, as the embedded model does)."""
PER_CALL = 2.0
"""Seconds of every later call; one call at a time (one slot, as the embedded model has)."""


@dataclass
class FakeModel:
    """Answers calls on the fake clock and tells `figures` about each, as `Model.on_call` does."""

    clock: Clock
    figures: EvalProgress
    cached_claims: frozenset[str] = frozenset()
    started: bool = False

    async def call(self, claim: str) -> None:
        await asyncio.sleep(0)  # a turn for the other item in flight (no time passes)
        cached = claim in self.cached_claims
        if not cached:
            self.clock.now += PER_CALL + (0.0 if self.started else START_UP)
            self.started = True
        self.figures.call(CallEvent("verdict", claim, cached, 1, 100, 10, 0.0))


@dataclass
class Costly:
    """A detector that makes `calls` model calls per claim (`calls(item index)` for each)."""

    name: str
    model: FakeModel | None
    calls: Callable[[str], int]

    async def detect(
        self, dag: Any, claims: Any, *, sentences: Any = None, gold: Any = None
    ) -> Any:
        out = []
        for c in claims:
            for _ in range(self.calls(c.id) if self.model is not None else 0):
                assert self.model is not None
                await self.model.call(c.id)
            out.append(Detection(self.name, c.id, Verdict.FULLY_SUPPORTED, score=1.0))
        return out


def _dataset(items: int) -> EvalDataset:
    return EvalDataset(
        "fake",
        [
            EvalItem(
                f"item{i}",
                (GoldClaim("c1", f"Claim {i}.", Verdict.FULLY_SUPPORTED),),
                dag_records=(
                    {"id": "r", "text": f"Source {i}.", "sources": []},
                    {"id": "t", "text": f"Claim {i}.", "sources": ["r"]},
                ),
            )
            for i in range(items)
        ],
    )


def _run(
    methods: Sequence[Costly], figures: EvalProgress, clock: Clock, items: int
) -> list[tuple[str, float, float | None]]:
    """Run the eval; at each finished (item, method) pair: (method, clock, time left shown)."""
    seen: list[tuple[str, float, float | None]] = []

    def progress(method: str, done: int, total: int) -> None:
        figures.item_done(method, done, total)
        seen.append((method, clock.now, figures.eta()))

    asyncio.run(run_eval(_dataset(items), list(methods), progress=progress))
    return seen


def test_time_left_counts_calls_per_method_and_leaves_out_the_start_up() -> None:
    """VeriTrail makes 5 calls a claim, direct 1: the pace of pairs swung with whichever had just
    finished, and the first pairs carried the model's start-up. Counted in calls per method,
    paced from the model's first answer, the estimate is the time the fake model still takes."""
    clock = Clock()
    figures = EvalProgress(["veritrail", "direct"], 6, clock=clock)
    model = FakeModel(clock, figures)
    seen = _run(
        [Costly("veritrail", model, lambda c: 5), Costly("direct", model, lambda c: 1)],
        figures,
        clock,
        6,
    )
    end = clock.now
    assert len(seen) == 12
    # No basis until both methods finished a pair: VeriTrail's first is done before any direct.
    first_direct = next(i for i, (m, _, _) in enumerate(seen) if m == "direct")
    assert all(eta is None for _, _, eta in seen[:first_direct])
    shown = [(t, eta) for _, t, eta in seen[first_direct:-1]]
    assert shown and all(eta is not None for _, eta in shown)
    for t, eta in shown:
        assert eta == pytest.approx(end - t)  # exact: no start-up in it, no swing
    assert seen[-1][2] is None  # finished
    # The pace of pairs from the start would have said, at the first estimate:
    t, eta = shown[0]
    pairs_done = first_direct + 1
    naive = (t - 100.0) / pairs_done * (12 - pairs_done)
    assert naive > 1.5 * (end - t)  # what the start-up did to the old estimate


def test_time_left_counts_down_between_pairs_and_none_when_it_runs_out() -> None:
    clock = Clock()
    figures = EvalProgress(["veritrail", "direct"], 6, clock=clock)
    model = FakeModel(clock, figures)
    checked: list[float] = []

    def progress(method: str, done: int, total: int) -> None:
        figures.item_done(method, done, total)
        if method == "direct" and done == 3:
            eta = figures.eta()
            assert eta is not None
            clock.now += 10  # a long call: nothing finishes for 10 s
            assert figures.eta() == pytest.approx(eta - 10)  # counted down, not recomputed
            assert f"~{fmt_duration(eta - 10)} left" in figures.line()
            clock.now += eta  # longer than the estimate
            assert figures.eta() is None and "left" not in figures.line()  # ran out: none
            checked.append(eta)
        elif checked and len(checked) == 1:
            assert figures.eta() is not None  # the next finished pair: an estimate again
            checked.append(0.0)

    methods = [Costly("veritrail", model, lambda c: 5), Costly("direct", model, lambda c: 1)]
    asyncio.run(run_eval(_dataset(6), methods, progress=progress))
    assert len(checked) == 2


def test_cache_hits_take_no_time_in_the_pace() -> None:
    """A re-run whose first items come from the response cache: their calls count in each
    method's calls per pair, not in the seconds per call."""
    clock = Clock()
    figures = EvalProgress(["veritrail", "direct"], 8, clock=clock)
    cached = frozenset(claim_key(f"item{i}", "c1") for i in range(4))
    model = FakeModel(clock, figures, cached_claims=cached)
    seen = _run(
        [Costly("veritrail", model, lambda c: 4), Costly("direct", model, lambda c: 1)],
        figures,
        clock,
        8,
    )
    end = clock.now
    shown = [(t, eta) for _, t, eta in seen if eta is not None]
    assert shown
    for t, eta in shown:
        assert eta == pytest.approx(end - t)
    assert figures.cached_calls == 4 * 5


def test_varying_calls_per_claim_keep_the_estimate_near() -> None:
    """VeriTrail's calls vary with the claim (3 to 7 here): the mean of the finished pairs."""
    clock = Clock()
    figures = EvalProgress(["veritrail", "direct"], 10, clock=clock)
    model = FakeModel(clock, figures)
    per_item = {claim_key(f"item{i}", "c1"): 3 + (i * 3) % 5 for i in range(10)}
    seen = _run(
        [Costly("veritrail", model, per_item.__getitem__), Costly("direct", model, lambda c: 1)],
        figures,
        clock,
        10,
    )
    end = clock.now
    shown = [(t, eta) for _, t, eta in seen if eta is not None]
    assert len(shown) >= 10
    for t, eta in shown:
        assert abs(eta - (end - t)) <= 0.35 * (end - t) + 3 * PER_CALL


def test_methods_without_model_calls_are_paced_by_pairs() -> None:
    """The gold oracle and the NLI baseline make no model call: the pace of the pairs."""
    clock = Clock()
    figures = EvalProgress(["oracle"], 4, clock=clock)
    seen: list[float | None] = []

    def progress(method: str, done: int, total: int) -> None:
        clock.now += 3
        figures.item_done(method, done, total)
        seen.append(figures.eta())

    asyncio.run(run_eval(_dataset(4), [Costly("oracle", None, lambda c: 0)], progress=progress))
    assert seen[0] == pytest.approx(9.0)  # 1 pair in 3 s, 3 left
    assert seen[-1] is None


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
