"""Evaluation metrics of docs/evaluation.md#metrics, in plain Python (numpy only for the bootstrap).

Conventions (docs/evaluation.md, "Metrics"):

* The positive class of AUROC is Fully Supported (a score is P(Fully Supported)).
* A precision, recall or F1 whose denominator is zero counts as 0, as scikit-learn does with
  ``zero_division=0``; balanced accuracy averages recall over the classes present in the gold
  labels (scikit-learn's behaviour). With no claim at all, every value is None.
* Claims that any compared method labels Inconclusive (or leaves without a verdict) are excluded
  from the hard-prediction metrics of all methods; the counts are reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..records import SentenceKey, Verdict

FS = Verdict.FULLY_SUPPORTED
NFS = Verdict.NOT_FULLY_SUPPORTED


@dataclass(frozen=True, slots=True)
class ClassScores:
    """Precision, recall, F1 and support (gold count) of one class."""

    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True, slots=True)
class HardMetrics:
    """Hard-prediction metrics over the claims that were kept (`n`)."""

    n: int
    macro_f1: float | None
    balanced_accuracy: float | None
    accuracy: float | None
    fs: ClassScores | None
    nfs: ClassScores | None


def _div(a: float, b: float) -> float:
    return a / b if b else 0.0


def _class_scores(gold: Sequence[Verdict], pred: Sequence[Verdict], cls: Verdict) -> ClassScores:
    tp = sum(1 for g, p in zip(gold, pred, strict=True) if g == cls and p == cls)
    n_pred = sum(1 for p in pred if p == cls)
    n_gold = sum(1 for g in gold if g == cls)
    precision = _div(tp, n_pred)
    recall = _div(tp, n_gold)
    return ClassScores(precision, recall, _div(2 * precision * recall, precision + recall), n_gold)


def hard_metrics(gold: Sequence[Verdict], pred: Sequence[Verdict]) -> HardMetrics:
    """Macro F1, balanced accuracy, accuracy and per-class scores over FS / NFS labels.

    Both sequences must hold only Fully Supported / Not Fully Supported (filter with
    `exclude_claims` first).
    """
    if len(gold) != len(pred):
        raise ValueError("gold and predictions differ in length")
    bad = {v for v in (*gold, *pred) if v not in (FS, NFS)}
    if bad:
        raise ValueError(
            f"hard metrics take only FS/NFS labels, got {sorted(b.value for b in bad)}"
        )
    if not gold:
        return HardMetrics(0, None, None, None, None, None)
    fs = _class_scores(gold, pred, FS)
    nfs = _class_scores(gold, pred, NFS)
    present = [c for c in (fs, nfs) if c.support > 0]
    return HardMetrics(
        n=len(gold),
        macro_f1=(fs.f1 + nfs.f1) / 2,
        balanced_accuracy=sum(c.recall for c in present) / len(present),
        accuracy=sum(1 for g, p in zip(gold, pred, strict=True) if g == p) / len(gold),
        fs=fs,
        nfs=nfs,
    )


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Which claims the hard-prediction comparison keeps, and why the others were left out."""

    kept: tuple[str, ...]
    inconclusive: tuple[str, ...]
    """Claims some method labelled Inconclusive."""
    no_verdict: tuple[str, ...]
    """Claims some method gave no verdict (a failure, or soft prediction with no qualified evidence)."""
    gold_not_binary: tuple[str, ...]
    """Claims whose gold label is Inconclusive (DiverseSumm+ "conflicting evidence")."""


def exclude_claims(
    gold: Mapping[str, Verdict],
    predictions: Mapping[str, Mapping[str, Verdict | None]],
) -> Exclusion:
    """Keep the claims that every method labelled FS or NFS (docs/evaluation.md#metrics), in `gold`'s order.

    A claim missing from a method's predictions counts as "no verdict".
    """
    kept: list[str] = []
    inc: list[str] = []
    none: list[str] = []
    gnb: list[str] = []
    for key, g in gold.items():
        preds = [m.get(key) for m in predictions.values()]
        if g not in (FS, NFS):
            gnb.append(key)
        elif any(p == Verdict.INCONCLUSIVE for p in preds):
            inc.append(key)
        elif any(p is None for p in preds):
            none.append(key)
        else:
            kept.append(key)
    return Exclusion(tuple(kept), tuple(inc), tuple(none), tuple(gnb))


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve (Mann-Whitney form; ties count one half). None if a class is absent."""
    if len(labels) != len(scores):
        raise ValueError("labels and scores differ in length")
    n_pos = sum(1 for y in labels if y)
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _average_ranks(scores)
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks with ties given their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        i = j + 1
    return ranks


# -- evidence selection ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvidenceScores:
    """Evidence precision / recall of one claim against its alternative gold sets."""

    precision: float | None
    """Share of selected sentences that belong to any gold set (None when nothing was selected)."""
    recall: float
    """Recall against the best-matching gold set (the one with the highest recall)."""
    best_set: int


def evidence_scores(
    selected: Iterable[SentenceKey], gold_sets: Sequence[frozenset[SentenceKey]]
) -> EvidenceScores | None:
    """Score one claim's selected sentences; None when the claim has no gold evidence.

    Any one gold set suffices (WiCE gives alternatives), so recall is the best recall over the
    sets (ties broken by the smaller set, then the first); a selected sentence is correct when it
    is in any gold set, so precision is against their union.
    """
    sets = [g for g in gold_sets if g]
    if not sets:
        return None
    sel = set(selected)
    best = max(
        range(len(sets)), key=lambda i: (len(sel & sets[i]) / len(sets[i]), -len(sets[i]), -i)
    )
    union: set[SentenceKey] = set().union(*sets)
    precision = len(sel & union) / len(sel) if sel else None
    return EvidenceScores(precision, len(sel & sets[best]) / len(sets[best]), best)


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None if there are none."""
    vs = [v for v in values if v is not None]
    return sum(vs) / len(vs) if vs else None


# -- error stages ---------------------------------------------------------------------------------


def error_stage_rates(tp_stages: Sequence[Sequence[int]]) -> dict[int, float]:
    """Share of true-positive claims that name each stage (a claim may name several)."""
    n = len(tp_stages)
    counts: dict[int, int] = {}
    for stages in tp_stages:
        for s in set(stages):
            counts[s] = counts.get(s, 0) + 1
    return {s: c / n for s, c in sorted(counts.items())} if n else {}


@dataclass(frozen=True, slots=True)
class StageRate:
    """Error attribution rate of one stage with its bootstrap 95% interval."""

    stage: int
    rate: float
    low: float
    high: float


def pooled_stage_rates(
    variants: Mapping[str, Mapping[str, Sequence[int]]],
    *,
    iterations: int = 1000,
    seed: int = 0,
) -> list[StageRate]:
    """Weighted error attribution rate per stage over variants, with bootstrap 95% CIs.

    `variants` maps a configuration to its true-positive claims and their error stages. The
    rate is each variant's share weighted by its number of true positives (so it is the pooled
    share); the bootstrap resamples the union of true-positive claims with replacement, each
    draw counting for every variant that has that claim as a true positive.
    """
    union: list[str] = list(dict.fromkeys(k for v in variants.values() for k in v))
    stages = sorted({s for v in variants.values() for ss in v.values() for s in ss})
    if not union or not stages:
        return []

    # claims x variants x stages indicator, and claims x variants membership.
    names = list(variants)
    member = np.zeros((len(union), len(names)))
    hit = np.zeros((len(union), len(names), len(stages)))
    sidx = {s: i for i, s in enumerate(stages)}
    for ci, key in enumerate(union):
        for vi, name in enumerate(names):
            got = variants[name].get(key)
            if got is None:
                continue
            member[ci, vi] = 1
            for s in set(got):
                hit[ci, vi, sidx[s]] = 1

    def rates(weights: np.ndarray) -> np.ndarray:
        # sum_v n_v * p_vs / sum_v n_v == (total stage hits) / (total TP memberships)
        denom = float((member * weights[:, None]).sum())
        return (
            (hit * weights[:, None, None]).sum(axis=(0, 1)) / denom
            if denom
            else np.zeros(len(stages))
        )

    point = rates(np.ones(len(union)))
    rng = np.random.default_rng(seed)
    boots = np.empty((iterations, len(stages)))
    for b in range(iterations):
        draw = np.bincount(rng.integers(0, len(union), len(union)), minlength=len(union)).astype(
            float
        )
        boots[b] = rates(draw)
    low = np.percentile(boots, 2.5, axis=0)
    high = np.percentile(boots, 97.5, axis=0)
    return [
        StageRate(s, float(point[i]), float(low[i]), float(high[i])) for i, s in enumerate(stages)
    ]


def jensen_shannon(p: Mapping[int, float], q: Mapping[int, float]) -> float | None:
    """Jensen-Shannon divergence (base 2, so in [0, 1]) of two stage distributions.

    Rates are normalised to sum to one first (a claim can name several stages, so rates need not).
    None if either side is all zero.
    """
    keys = sorted(set(p) | set(q))
    a = [p.get(k, 0.0) for k in keys]
    b = [q.get(k, 0.0) for k in keys]
    sa, sb = sum(a), sum(b)
    if sa <= 0 or sb <= 0:
        return None
    a = [x / sa for x in a]
    b = [x / sb for x in b]
    m = [(x + y) / 2 for x, y in zip(a, b, strict=True)]

    def kl(x: list[float], y: list[float]) -> float:
        return sum(xi * math.log2(xi / yi) for xi, yi in zip(x, y, strict=True) if xi > 0)

    return max(0.0, (kl(a, m) + kl(b, m)) / 2)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (Pearson correlation of average ranks); None if undefined."""
    if len(x) != len(y):
        raise ValueError("sequences differ in length")
    if len(x) < 2:
        return None
    rx, ry = _average_ranks(x), _average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


def stage_agreement(
    p: Mapping[int, float], q: Mapping[int, float]
) -> tuple[float | None, float | None]:
    """(Jensen-Shannon divergence, Spearman correlation) of two stage-rate maps over their union."""
    keys = sorted(set(p) | set(q))
    return jensen_shannon(p, q), spearman(
        [p.get(k, 0.0) for k in keys], [q.get(k, 0.0) for k in keys]
    )
