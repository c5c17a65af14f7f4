"""Judge–human agreement on reviewed runs: confusion matrix and Cohen's kappa (docs/runs.md).

`veritrail eval reviewed:RUNS` reads the claims people reviewed (`veritrail review`) as a
dataset whose gold label is the reviewed verdict (`datasets.reviewed`), and compares with it the
verdict the run's own model gave (the *judge* of the runs) and, with ``--method``, each method
that `veritrail eval` runs on the same claims.

Cohen's kappa over the three verdicts (and "no verdict", for a claim whose judge ended in an
error): ``(p_o - p_e) / (1 - p_e)``, where ``p_o`` is the share of claims on which judge and
human agree and ``p_e`` the agreement expected by chance from each one's label frequencies
(scikit-learn's `cohen_kappa_score` without weights; undefined, None, when ``p_e`` is 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..records import Verdict
from .datasets import EvalDataset, claim_key, iter_claims
from .datasets.reviewed import MODEL_VERDICT, REVIEWED_SOURCE

if TYPE_CHECKING:
    from .runner import EvalRun

NO_VERDICT = "no verdict"
LABELS: tuple[str, ...] = (*(v.value for v in Verdict), NO_VERDICT)
"""Rows (human) and columns (judge) of every confusion matrix, in this order."""

RUN_JUDGE = "judge of the runs"
"""The name of the row comparing the runs' own verdicts with the reviews."""


@dataclass(frozen=True, slots=True)
class Agreement:
    """How one judge agrees with the human reviews."""

    judge: str
    labels: tuple[str, ...]
    matrix: tuple[tuple[int, ...], ...]
    """``matrix[i][j]``: claims the human labelled ``labels[i]`` and the judge ``labels[j]``."""
    n: int
    observed: float | None
    """Share of claims on which they agree (None with no claim)."""
    kappa: float | None

    def to_json(self) -> dict[str, Any]:
        """The agreement as `veritrail eval --format json` writes it."""
        return {
            "judge": self.judge,
            "n": self.n,
            "observed_agreement": self.observed,
            "cohen_kappa": self.kappa,
            "labels": list(self.labels),
            "confusion_matrix": [list(r) for r in self.matrix],
            "rows": "human (reviewed verdict)",
            "columns": "judge",
        }


def confusion_matrix(
    human: Sequence[str], judge: Sequence[str], labels: Sequence[str] = LABELS
) -> list[list[int]]:
    """Counts of (human label, judge label) pairs, rows and columns in `labels`' order."""
    index = {label: i for i, label in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for h, j in zip(human, judge, strict=True):
        m[index[h]][index[j]] += 1
    return m


def cohen_kappa(matrix: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square confusion matrix (None when undefined: no claim, or chance
    agreement 1, both raters giving one and the same label to every claim)."""
    n = sum(sum(r) for r in matrix)
    if not n:
        return None
    k = len(matrix)
    observed = sum(matrix[i][i] for i in range(k)) / n
    rows = [sum(matrix[i]) for i in range(k)]
    cols = [sum(matrix[i][j] for i in range(k)) for j in range(k)]
    expected = sum(rows[i] * cols[i] for i in range(k)) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def agreement(judge: str, pairs: Iterable[tuple[Verdict, Verdict | str | None]]) -> Agreement:
    """The agreement of `judge` from (human verdict, judge verdict or None) pairs."""
    human: list[str] = []
    other: list[str] = []
    for h, j in pairs:
        human.append(h.value)
        other.append(NO_VERDICT if j is None else str(j.value if isinstance(j, Verdict) else j))
    m = confusion_matrix(human, other)
    n = len(human)
    observed = sum(m[i][i] for i in range(len(LABELS))) / n if n else None
    return Agreement(judge, LABELS, tuple(tuple(r) for r in m), n, observed, cohen_kappa(m))


def is_reviewed(ds: EvalDataset) -> bool:
    """Whether `ds` was read from reviewed runs (`reviewed:PATH`)."""
    return ds.meta.get("source") == REVIEWED_SOURCE


def agreements(ds: EvalDataset, run: EvalRun | None = None) -> list[Agreement]:
    """The runs' own judge against the reviews, then each method of `run` (when given)."""
    pairs = [(gc.label, gc.meta.get(MODEL_VERDICT)) for _, gc in iter_claims(ds)]
    out = [agreement(RUN_JUDGE, pairs)]
    if run is not None:
        for m in run.methods:
            preds = run.predictions[m]
            got = []
            for item, gc in iter_claims(ds):
                p = preds.get(claim_key(item.id, gc.id))
                got.append((gc.label, p.verdict if p is not None else None))
            out.append(agreement(m, got))
    return out


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _shown_labels(ags: Sequence[Agreement]) -> list[int]:
    """Indexes of the labels worth a row or column: the three verdicts, plus "no verdict"
    when some judge left a claim without one."""
    last = len(LABELS) - 1
    used = any(a.matrix[i][last] for a in ags for i in range(len(LABELS)))
    return list(range(last + (1 if used else 0)))


def render_markdown(ags: Sequence[Agreement]) -> str:
    """The agreement table and each judge's confusion matrix, as Markdown."""
    show = _shown_labels(ags)
    lines = [
        "| Judge | n | Agreement | Cohen's kappa |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {a.judge} | {a.n} | {_num(a.observed)} | {_num(a.kappa)} |".replace("\n", " ")
            for a in ags
        ),
    ]
    for a in ags:
        lines += [
            "",
            f"Confusion matrix, {a.judge} (rows: reviewed verdict; columns: judge):",
            "",
            "| reviewed \\ judge | " + " | ".join(LABELS[j] for j in show) + " |",
            "| --- |" + " ---: |" * len(show),
            *(
                f"| {LABELS[i]} | " + " | ".join(str(a.matrix[i][j]) for j in show) + " |"
                for i in show
            ),
        ]
    return "\n".join(lines) + "\n"


def render_terminal(ags: Sequence[Agreement]) -> Any:
    """The same as rich tables (a `rich.console.Group`)."""
    from rich.console import Group
    from rich.table import Table

    show = _shown_labels(ags)
    head = Table(title="Judge–human agreement (reviewed claims)")
    for name, justify in (
        ("Judge", "left"),
        ("n", "right"),
        ("Agreement", "right"),
        ("Cohen's kappa", "right"),
    ):
        head.add_column(name, justify=justify)  # type: ignore[arg-type]
    for a in ags:
        head.add_row(a.judge, str(a.n), _num(a.observed), _num(a.kappa))
    parts: list[Any] = [head]
    for a in ags:
        t = Table(title=f"{a.judge}: rows reviewed verdict, columns judge")
        t.add_column("reviewed \\ judge")
        for j in show:
            t.add_column(LABELS[j], justify="right")
        for i in show:
            t.add_row(LABELS[i], *(str(a.matrix[i][j]) for j in show))
        parts.append(t)
    return Group(*parts)


__all__ = [
    "LABELS",
    "NO_VERDICT",
    "RUN_JUDGE",
    "Agreement",
    "agreement",
    "agreements",
    "cohen_kappa",
    "confusion_matrix",
    "is_reviewed",
    "render_markdown",
    "render_terminal",
]
