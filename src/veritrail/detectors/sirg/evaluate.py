"""Evaluation of SIRG and its baselines on labelled responses (issue item 5).

Everything here works on cached analyses, so comparing variants never reruns attribution.
Metrics are for the hallucinated class at the response level: precision, recall and F1 with
percentile-bootstrap 95% intervals over responses, swept over the threshold ``tau`` on the share
of flagged fragments.

Compared variants (``compare``):

* ``majority`` — always the majority label of the training set;
* ``sirg`` — the graph (AttnLRP) linearised into the fine-tuned classifier;
* ``text_only`` — the same classifier on (fragment, context + query) with no attribution;
* ``coarse`` — LRP4RAG-style max/mean relevance features of the token rows, logistic regression;
* ``random_graph`` — the SIRG pipeline on random relevance rows (same fragments and support);
* ``ixg`` — the SIRG pipeline on Input×Gradient relevance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .analysis import Analysis, coarse_features, random_rows
from .attribution import Method
from .classifier import FragmentClassifier, PairExample, response_flag
from .dataset import LabelledRecord
from .detector import DetectorConfig, graph_of, graph_pairs, line_labels

DEFAULT_TAUS = (0.0, 0.25, 0.5, 0.75)


@dataclass(frozen=True)
class Score:
    """Precision, recall and F1 of the hallucinated class with bootstrap 95% intervals."""

    precision: float
    recall: float
    f1: float
    precision_ci: tuple[float, float]
    recall_ci: tuple[float, float]
    f1_ci: tuple[float, float]
    n: int
    positives: int
    predicted_positives: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form, rounded to 4 decimals."""

        def r(x: float) -> float:
            return round(float(x), 4)

        return {
            "precision": r(self.precision),
            "recall": r(self.recall),
            "f1": r(self.f1),
            "precision_ci": [r(x) for x in self.precision_ci],
            "recall_ci": [r(x) for x in self.recall_ci],
            "f1_ci": [r(x) for x in self.f1_ci],
            "n": self.n,
            "positives": self.positives,
            "predicted_positives": self.predicted_positives,
        }


def prf(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float, float, float]:
    """Precision, recall, F1 of class 1 (0 where undefined)."""
    tp = float(np.sum((y_true == 1) & (y_pred == 1)))
    fp = float(np.sum((y_true == 0) & (y_pred == 1)))
    fn = float(np.sum((y_true == 1) & (y_pred == 0)))
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def score(
    y_true: Sequence[int], y_pred: Sequence[int], *, n_boot: int = 1000, seed: int = 0
) -> Score:
    """Point estimates and percentile-bootstrap 95% intervals (resampling responses)."""
    t = np.asarray(y_true, dtype=int)
    p = np.asarray(y_pred, dtype=int)
    if t.shape != p.shape:
        raise ValueError("y_true and y_pred differ in length")
    point = prf(t, p)
    rng = np.random.default_rng(seed)
    boots = np.array(
        [prf(t[idx], p[idx]) for idx in rng.integers(0, len(t), (n_boot, len(t)))]
        if len(t)
        else np.zeros((1, 3))
    )
    lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
    return Score(
        precision=point[0],
        recall=point[1],
        f1=point[2],
        precision_ci=(float(lo[0]), float(hi[0])),
        recall_ci=(float(lo[1]), float(hi[1])),
        f1_ci=(float(lo[2]), float(hi[2])),
        n=len(t),
        positives=int(t.sum()),
        predicted_positives=int(p.sum()),
    )


def sweep_tau(
    y_true: Sequence[int],
    fragment_probs: Sequence[Sequence[float]],
    *,
    taus: Sequence[float] = DEFAULT_TAUS,
    fragment_threshold: float = 0.5,
    n_boot: int = 1000,
) -> dict[str, dict[str, Any]]:
    """Response-level scores for each tau (keys are the tau values as text)."""
    out = {}
    for tau in taus:
        pred = [
            int(response_flag([p > fragment_threshold for p in probs], tau))
            for probs in fragment_probs
        ]
        out[f"{tau:g}"] = score(y_true, pred, n_boot=n_boot).to_dict()
    return out


# --- baselines ---------------------------------------------------------------------------------


def _graph_pairs(
    analysis: Analysis, record: LabelledRecord, config: DetectorConfig
) -> tuple[list[PairExample], list[tuple[str, str]]]:
    graph = graph_of(analysis, config)
    labels = line_labels(record.response, record.line_labels, analysis)
    pairs = graph_pairs(graph)
    return [PairExample(t, e, labels[n]) for n, t, e in pairs], [(t, e) for _, t, e in pairs]


def _text_pairs(
    analysis: Analysis, record: LabelledRecord
) -> tuple[list[PairExample], list[tuple[str, str]]]:
    labels = line_labels(record.response, record.line_labels, analysis)
    evidence = f"{record.context}\n{record.query}"
    ids = analysis.response_node_ids()
    texts = [analysis.nodes[i].fragment.text for i in ids]
    return (
        [PairExample(t, evidence, labels[i]) for i, t in zip(ids, texts, strict=True)],
        [(t, evidence) for t in texts],
    )


PairMaker = Callable[[Analysis, LabelledRecord], tuple[list[PairExample], list[tuple[str, str]]]]


def classifier_variant(
    train: Sequence[tuple[Analysis, LabelledRecord]],
    test: Sequence[tuple[Analysis, LabelledRecord]],
    make_pairs: PairMaker,
    *,
    new_classifier: Callable[[], FragmentClassifier],
    train_kwargs: dict[str, Any],
) -> tuple[list[list[float]], list[float]]:
    """Fine-tune a fresh classifier on the training pairs; fragment probabilities per test
    response, and the training losses."""
    examples: list[PairExample] = []
    for a, r in train:
        examples.extend(make_pairs(a, r)[0])
    clf = new_classifier()
    losses = clf.train(examples, **train_kwargs)
    probs = []
    for a, r in test:
        pairs = make_pairs(a, r)[1]
        probs.append(clf.predict_proba(pairs).tolist() if pairs else [])
    return probs, losses


def fit_logistic(
    x: np.ndarray, y: np.ndarray, *, l2: float = 1e-2, steps: int = 2000, lr: float = 0.1
) -> Callable[[np.ndarray], np.ndarray]:
    """Class-balanced L2 logistic regression by gradient descent on standardised features."""
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mu) / sd
    n1 = max(int(y.sum()), 1)
    n0 = max(len(y) - int(y.sum()), 1)
    sw = np.where(y == 1, len(y) / (2 * n1), len(y) / (2 * n0))
    w = np.zeros(z.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = sw * (p - y)
        w -= lr * (z.T @ g / len(y) + l2 * w)
        b -= lr * float(g.mean())

    def predict(xn: np.ndarray) -> np.ndarray:
        out: np.ndarray = 1 / (1 + np.exp(-(((xn - mu) / sd) @ w + b)))
        return out

    return predict


def compare(
    records_train: Sequence[LabelledRecord],
    records_test: Sequence[LabelledRecord],
    analyses: dict[Method, tuple[Sequence[Analysis], Sequence[Analysis]]],
    *,
    config: DetectorConfig,
    new_classifier: Callable[[], FragmentClassifier],
    train_kwargs: dict[str, Any],
    variants: Sequence[str] = ("majority", "sirg", "text_only", "coarse", "random_graph", "ixg"),
    taus: Sequence[float] = DEFAULT_TAUS,
    n_boot: int = 1000,
    seed: int = 0,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Run the variants; ``analyses[method] = (train analyses, test analyses)`` aligned with
    the records. Returns a JSON-serialisable result."""
    y_train = np.array([r.response_label for r in records_train])
    y_test = [r.response_label for r in records_test]
    lrp_train, lrp_test = analyses[Method.ATTNLRP]
    out: dict[str, Any] = {
        "n_train": len(records_train),
        "n_test": len(records_test),
        "train_positives": int(y_train.sum()),
        "test_positives": int(sum(y_test)),
        "variants": {},
    }

    def graph_maker(
        a: Analysis, r: LabelledRecord
    ) -> tuple[list[PairExample], list[tuple[str, str]]]:
        return _graph_pairs(a, r, config)

    for v in variants:
        log(f"variant {v}")
        if v == "majority":
            maj = int(y_train.mean() > 0.5)
            res: dict[str, Any] = {
                "all": score(y_test, [maj] * len(y_test), n_boot=n_boot).to_dict()
            }
        elif v == "coarse":
            xtr = np.stack([coarse_features(a) for a in lrp_train])
            xte = np.stack([coarse_features(a) for a in lrp_test])
            pred = fit_logistic(xtr, y_train.astype(float))(xte)
            res = {
                "p>0.5": score(y_test, (pred > 0.5).astype(int).tolist(), n_boot=n_boot).to_dict()
            }
        else:
            maker: PairMaker
            if v == "sirg":
                tr, te, maker = lrp_train, lrp_test, graph_maker
            elif v == "text_only":
                tr, te, maker = lrp_train, lrp_test, _text_pairs
            elif v == "random_graph":
                tr = [a.with_rows(random_rows(a, seed + i)) for i, a in enumerate(lrp_train)]
                te = [
                    a.with_rows(random_rows(a, seed + 10_000 + i)) for i, a in enumerate(lrp_test)
                ]
                maker = graph_maker
            elif v == "ixg":
                tr, te = analyses[Method.INPUT_X_GRADIENT]
                maker = graph_maker
            else:
                raise ValueError(f"unknown variant {v!r}")
            probs, losses = classifier_variant(
                list(zip(tr, records_train, strict=True)),
                list(zip(te, records_test, strict=True)),
                maker,
                new_classifier=new_classifier,
                train_kwargs=train_kwargs,
            )
            res = dict(sweep_tau(y_test, probs, taus=taus, n_boot=n_boot))
            res["train_loss_first_last"] = [round(losses[0], 4), round(losses[-1], 4)]
        out["variants"][v] = res
    return out
