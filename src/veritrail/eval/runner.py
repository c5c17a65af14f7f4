"""Run detectors over a labelled dataset and summarise the results (docs/evaluation.md#metrics).

`run_eval` produces an `EvalRun` (every prediction of every method); `summarize` turns it into
an `EvalSummary`: one `MethodRow` per method (the rows of the paper's Table 1) plus the
exclusion counts, AUROC, evidence scores, costs and the error-stage analysis.

A method is any `veritrail.detectors.base.Detector`: the runner calls its `detect` and nothing
else, and a prediction is the detector's `Detection`.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..detectors.base import Detection, Detector, check_detections
from ..display import CallLike, CallTotals, Countdown, fmt_duration, fmt_int
from ..method.segment import SentenceIndex
from ..records import ErrorStageStatus
from .datasets import EvalDataset, GoldClaim, claim_key
from .metrics import (
    FS,
    NFS,
    Exclusion,
    HardMetrics,
    StageRate,
    auroc,
    error_stage_rates,
    evidence_scores,
    exclude_claims,
    hard_metrics,
    mean_or_none,
    pooled_stage_rates,
    stage_agreement,
)


@dataclass(slots=True)
class EvalRun:
    """Gold claims (dataset order) and each method's predictions by claim key."""

    dataset: str
    gold: dict[str, GoldClaim]
    methods: list[str]
    predictions: dict[str, dict[str, Detection]]
    meta: dict[str, Any] = field(default_factory=dict)


Progress = Callable[[str, int, int], None]
"""Called as (method name, items that method has finished, items total), each time a method
finishes an item."""

_PAIR: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "veritrail_eval_pair", default=None
)
"""The (method, item index) that `run_eval` is running in this task. The methods share one model,
so a call event does not say whose it is; the detector's calls run in the task (or in tasks it
starts, which copy the context) that set this, so `EvalProgress` can count calls per method."""


@dataclass
class EvalProgress(CallTotals):
    """The running figures of `veritrail eval` and its status line (as `verify` shows).

    Feeds: `item_done` (the `progress` callback of `run_eval`) and `call` (the model's
    `on_call`, one event per call, response-cache hits included). Everything runs on the event
    loop's thread, so no locking.

    The time left is counted in model calls, not in (item, method) pairs: methods differ ten
    times in cost (direct verification makes one call a claim, VeriTrail about five), so the
    pace of pairs swung with whichever method had just finished one. It is

        seconds per call × Σ over methods (calls that method's unfinished pairs still need)

    where a method's calls per pair are the mean of its finished pairs (measured, not
    predicted: `run.estimate` predicts VeriTrail's loop only, and the baselines' costs are
    what they are), a pair in flight still needs that mean less the calls it made (at least
    one), and the seconds per call are measured from the model's first answer — starting the
    model and reading the dataset happen before it, once — over the calls the model answered
    since (response-cache hits take no time and are left out; the calls left are assumed not
    cached). None until it has a basis: every method with pairs left has finished one, and the
    model answered a call after its first. Recomputed when a pair finishes, averaged with the
    counted-down previous estimate, counted down in between, and none when the countdown runs
    out, until the next pair finishes. An eval whose methods make no model call (the gold
    oracle, the NLI baseline) is paced by its finished pairs instead.
    """

    methods: Sequence[str]
    items: int
    clock: Callable[[], float] = time.monotonic
    done: dict[str, int] = field(default_factory=dict)
    started: float = field(default=0.0)
    _work_t0: float | None = field(default=None, init=False, repr=False)
    """When the model first answered a call (not from the response cache): the pace is
    measured from it."""
    _paid_calls: int = field(default=0, init=False, repr=False)
    """Calls the model answered (not from the response cache), the first included."""
    _pair_calls: Counter[tuple[str, int]] = field(default_factory=Counter, init=False, repr=False)
    """Calls answered so far for each (method, item) pair in flight."""
    _method_calls: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    """Calls of each method's finished pairs."""
    _method_pairs: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    """Finished pairs of each method whose calls were counted."""
    _eta: Countdown = field(default_factory=Countdown, init=False, repr=False)
    """The time left, set at each finished pair and counted down in between (as `verify`'s)."""

    def __post_init__(self) -> None:
        self.started = self.clock()
        for m in self.methods:
            self.done.setdefault(m, 0)

    def call(self, event: CallLike) -> None:
        """`Model(on_call=...)` hook: count the call, and for the estimate its method's pair."""
        super().call(event)
        if event.error is not None:
            return
        if not event.cached:
            if self._work_t0 is None:
                self._work_t0 = self.clock()
            self._paid_calls += 1
        pair = _PAIR.get()
        if pair is not None:
            self._pair_calls[pair] += 1

    def item_done(self, method: str, done: int, total: int) -> None:
        """`run_eval(progress=...)` hook."""
        self.done[method] = done
        self.items = total
        pair = _PAIR.get()
        if pair is not None and pair[0] == method:
            self._method_calls[method] += self._pair_calls.pop(pair, 0)
            self._method_pairs[method] += 1
        self._update_eta()

    @property
    def elapsed(self) -> float:
        """Seconds since the eval started."""
        return self.clock() - self.started

    def calls_left(self) -> float | None:
        """Model calls the unfinished (item, method) pairs still need, or None while a method
        with pairs left has finished none (no measure of its cost yet)."""
        left = 0.0
        for m in self.methods:
            pairs_left = self.items - self.done.get(m, 0)
            if pairs_left <= 0:
                continue
            if self._method_pairs[m] <= 0:
                return None
            mean = self._method_calls[m] / self._method_pairs[m]
            flying = [n for (pm, _), n in self._pair_calls.items() if pm == m]
            floor = 1.0 if mean > 0 else 0.0  # a method that makes calls needs one more
            left += sum(max(floor, mean - n) for n in flying)
            left += max(0, pairs_left - len(flying)) * mean
        return left

    def _fresh_eta(self, now: float) -> float | None:
        """Seconds left by the measures of this moment (see the class's doc), or None."""
        calls_left = self.calls_left()
        if calls_left is None:
            return None
        if self._paid_calls > 1 and self._work_t0 is not None:
            # The first answer's own time is part of the start-up: paced from it on.
            return (now - self._work_t0) / (self._paid_calls - 1) * calls_left
        if self.calls == 0 and self.failed_calls == 0:
            # No model calls at all (oracle, NLI): the pace of the finished pairs.
            finished = sum(self.done.values())
            pairs_left = self.items * len(self.methods) - finished
            return (now - self.started) / finished * pairs_left if finished else None
        return None  # one answer, or cache hits only: no pace of the model's own yet

    def _update_eta(self) -> None:
        """A pair finished: a fresh estimate, averaged with the counted-down previous one."""
        now = self.clock()
        self._eta.set(now, None if self.finished() else self._fresh_eta(now))

    def eta(self) -> float | None:
        """Seconds left (see the class's doc), or None when there is no estimate."""
        if self.finished():
            return None
        return self._eta.left(self.clock())

    def finished(self) -> bool:
        """Whether every method has finished every item."""
        return all(self.done.get(m, 0) >= self.items for m in self.methods)

    def line(self) -> str:
        """One status line: items done per method, calls, tokens, dollars, elapsed, time left."""
        parts = [
            "eval: " + ", ".join(f"{m} {self.done.get(m, 0)}/{self.items}" for m in self.methods),
            f"calls {self.calls} (cache {self.cached_calls}"
            + (f", failed {self.failed_calls}" if self.failed_calls else "")
            + ")",
            f"tokens {fmt_int(self.input_tokens)} in"
            + (
                f" ({fmt_int(self.cached_input_tokens)} prompt-cached)"
                if self.cached_input_tokens
                else ""
            )
            + f" / {fmt_int(self.output_tokens)} out",
            self.dollars_text(),
            f"{fmt_duration(self.elapsed)} elapsed",
        ]
        eta = self.eta()
        if eta is not None:
            parts.append(f"~{fmt_duration(eta)} left")
        return " · ".join(parts)


async def run_eval(
    ds: EvalDataset,
    methods: Sequence[Detector],
    *,
    max_parallel_items: int = 2,
    progress: Progress | None = None,
) -> EvalRun:
    """Run every method on every item. Items run concurrently (bounded); methods in turn per item.

    All methods see the same claims (ids = dataset-wide claim keys), the same DAG and the same
    sentence segmentation; the labelled claims go along as `gold` (only the gold oracle reads
    them). A method must answer every claim of an item, in order (`RuntimeError` otherwise).
    """
    gold = {claim_key(it.id, c.id): c for it in ds.items for c in it.claims}
    preds: dict[str, dict[str, Detection]] = {m.name: {} for m in methods}
    if len(preds) != len(methods):
        raise ValueError("two methods share a name; give them different settings")
    sem = asyncio.Semaphore(max(1, max_parallel_items))
    done: Counter[str] = Counter()

    async def one(item_index: int) -> None:
        item = ds.items[item_index]
        async with sem:
            dag = ds.dag(item)
            sentences = SentenceIndex(dag)  # one segmentation per item, shared by every method
            claims = [c.as_claim(item.id) for c in item.claims]
            labels = {c.id: g for c, g in zip(claims, item.claims, strict=True)}
            for m in methods:
                pair = _PAIR.set((m.name, item_index))  # whose calls these are (EvalProgress)
                try:
                    out = await m.detect(dag, claims, sentences=sentences, gold=labels)
                    for p in check_detections(m, claims, out):
                        preds[m.name][p.claim_id] = p
                    done[m.name] += 1
                    if progress is not None:
                        progress(m.name, done[m.name], len(ds.items))
                finally:
                    _PAIR.reset(pair)

    await asyncio.gather(*(one(i) for i in range(len(ds.items))))
    return EvalRun(ds.name, gold, [m.name for m in methods], preds, dict(ds.meta))


# -- summary --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MethodRow:
    """One row of the results table."""

    method: str
    claims: int
    hard: HardMetrics
    auroc: float | None
    auroc_n: int
    evidence_precision: float | None
    evidence_recall: float | None
    evidence_n: int
    calls_per_claim: float
    input_tokens_per_claim: float
    output_tokens_per_claim: float
    dollars_per_claim: float
    nodes_read_share: float
    verdicts: dict[str, int]
    failures: int
    true_positives_with_stage: int
    stage_rates: tuple[StageRate, ...]


@dataclass(frozen=True, slots=True)
class StagePair:
    """Agreement of two methods' error-stage distributions."""

    a: str
    b: str
    jensen_shannon: float | None
    spearman: float | None


@dataclass(frozen=True, slots=True)
class EvalSummary:
    """Everything `veritrail eval` reports."""

    dataset: str
    claims: int
    gold: dict[str, int]
    exclusion: Exclusion
    auroc_claims: int
    rows: tuple[MethodRow, ...]
    pooled_stages: tuple[StageRate, ...]
    stage_pairs: tuple[StagePair, ...]
    meta: dict[str, Any]


def _tp_stages(run: EvalRun, method: str) -> dict[str, tuple[int, ...]]:
    """True positives with named stages: gold NFS, predicted NFS, stages identified."""
    out: dict[str, tuple[int, ...]] = {}
    for key, g in run.gold.items():
        p = run.predictions[method].get(key)
        if (
            p is not None
            and g.label == NFS
            and p.verdict == NFS
            and p.error_stage_status == ErrorStageStatus.IDENTIFIED
            and p.error_stages
        ):
            out[key] = p.error_stages
    return out


def summarize(run: EvalRun, *, bootstrap: int = 1000, seed: int = 0) -> EvalSummary:
    """Compute every metric of docs/evaluation.md#metrics for every method of `run`."""
    gold_labels = {k: g.label for k, g in run.gold.items()}
    verdicts = {m: {k: p.verdict for k, p in run.predictions[m].items()} for m in run.methods}
    excl = exclude_claims(gold_labels, verdicts)
    kept = [str(k) for k in excl.kept]

    scoring = [
        m for m in run.methods if any(p.score is not None for p in run.predictions[m].values())
    ]
    scored_keys = [
        k
        for k, g in run.gold.items()
        if g.label in (FS, NFS)
        and all(
            (p := run.predictions[m].get(k)) is not None and p.score is not None for m in scoring
        )
    ]

    stage_maps = {m: _tp_stages(run, m) for m in run.methods}
    stage_methods = [
        m
        for m in run.methods
        if any(p.error_stage_status is not None for p in run.predictions[m].values())
    ]

    rows: list[MethodRow] = []
    for m in run.methods:
        preds = run.predictions[m]
        hard = hard_metrics([gold_labels[k] for k in kept], [preds[k].verdict or NFS for k in kept])
        au = (
            auroc(
                [run.gold[k].label == FS for k in scored_keys],
                [preds[k].score or 0.0 for k in scored_keys],
            )
            if m in scoring
            else None
        )
        ev = [
            evidence_scores(p.evidence, run.gold[k].gold_evidence)
            for k, p in preds.items()
            if p.evidence is not None and k in run.gold
        ]
        ev_ok = [e for e in ev if e is not None]
        n = max(1, len(preds))
        tp = stage_maps[m]
        rates = (
            tuple(pooled_stage_rates({m: tp}, iterations=bootstrap, seed=seed))
            if m in stage_methods
            else ()
        )
        rows.append(
            MethodRow(
                method=m,
                claims=len(preds),
                hard=hard,
                auroc=au,
                auroc_n=len(scored_keys) if m in scoring else 0,
                evidence_precision=mean_or_none(e.precision for e in ev_ok),
                evidence_recall=mean_or_none(e.recall for e in ev_ok),
                evidence_n=len(ev_ok),
                calls_per_claim=sum(p.lm_calls for p in preds.values()) / n,
                input_tokens_per_claim=sum(p.input_tokens for p in preds.values()) / n,
                output_tokens_per_claim=sum(p.output_tokens for p in preds.values()) / n,
                dollars_per_claim=sum(p.dollars for p in preds.values()) / n,
                nodes_read_share=sum(p.nodes_read_share for p in preds.values()) / n,
                verdicts=dict(
                    Counter(p.verdict.value if p.verdict else "no verdict" for p in preds.values())
                ),
                failures=sum(1 for p in preds.values() if p.error),
                true_positives_with_stage=len(tp),
                stage_rates=rates,
            )
        )

    pairs: list[StagePair] = []
    for a, b in itertools.combinations(stage_methods, 2):
        pa, pb = (
            error_stage_rates(list(stage_maps[a].values())),
            error_stage_rates(list(stage_maps[b].values())),
        )
        js, sp = stage_agreement(pa, pb) if pa and pb else (None, None)
        pairs.append(StagePair(a, b, js, sp))
    pooled = pooled_stage_rates(
        {m: stage_maps[m] for m in stage_methods}, iterations=bootstrap, seed=seed
    )

    return EvalSummary(
        dataset=run.dataset,
        claims=len(run.gold),
        gold=dict(Counter(g.label.value for g in run.gold.values())),
        exclusion=excl,
        auroc_claims=len(scored_keys) if scoring else 0,
        rows=tuple(rows),
        pooled_stages=tuple(pooled),
        stage_pairs=tuple(pairs),
        meta=run.meta,
    )
