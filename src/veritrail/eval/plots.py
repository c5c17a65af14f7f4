"""PNG/SVG plots of an `EvalSummary` (matplotlib, installed with the `eval` extra).

* `plot_precision_recall`: grouped bars of precision and recall per class for each method;
* `plot_error_stages`: error attribution rate per stage for each method, with bootstrap 95% CIs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .metrics import ClassScores
from .runner import EvalSummary, MethodRow


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError("plots need matplotlib: pip install 'veritrail[eval]'") from exc
    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, stem: Path, formats: tuple[str, ...]) -> list[Path]:
    out = []
    for fmt in formats:
        p = stem.with_suffix(f".{fmt}")
        # A fixed date keeps SVG output byte-stable between runs.
        fig.savefig(
            p,
            format=fmt,
            dpi=150,
            bbox_inches="tight",
            metadata={"Date": None} if fmt == "svg" else None,
        )
        out.append(p)
    return out


def plot_precision_recall(
    summary: EvalSummary, stem: str | Path, formats: tuple[str, ...] = ("png", "svg")
) -> list[Path]:
    """Bars of P/R for Fully Supported and Not Fully Supported per method; returns the files."""
    plt = _pyplot()

    def fs(r: MethodRow) -> ClassScores | None:
        return r.hard.fs

    def nfs(r: MethodRow) -> ClassScores | None:
        return r.hard.nfs

    series: list[tuple[str, Callable[[MethodRow], ClassScores | None], str]] = [
        ("Precision FS", fs, "precision"),
        ("Recall FS", fs, "recall"),
        ("Precision NFS", nfs, "precision"),
        ("Recall NFS", nfs, "recall"),
    ]
    rows = summary.rows
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(rows) + 2), 4))
    width = 0.8 / len(series)
    for j, (label, get, attr) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(rows))]
        vals = [100 * float(getattr(cs, attr)) if (cs := get(r)) is not None else 0.0 for r in rows]
        ax.bar(xs, vals, width, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r.method for r in rows], rotation=20, ha="right")
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    n = len(summary.exclusion.kept)
    ax.set_title(f"{summary.dataset}: precision / recall per class ({n} claims)")
    # Below the axes: bars reach 100% and a legend inside would hide them.
    ax.legend(ncols=4, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.3))
    fig.tight_layout()
    try:
        return _save(fig, Path(stem), formats)
    finally:
        plt.close(fig)


def plot_error_stages(
    summary: EvalSummary, stem: str | Path, formats: tuple[str, ...] = ("png", "svg")
) -> list[Path]:
    """Error attribution rate per stage and method with 95% CIs; returns the files (none if no data)."""
    rows = [r for r in summary.rows if r.stage_rates]
    if not rows:
        return []
    plt = _pyplot()
    stages = sorted({s.stage for r in rows for s in r.stage_rates})
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(stages) * len(rows) / 2 + 3), 4))
    width = 0.8 / len(rows)
    for j, r in enumerate(rows):
        by = {s.stage: s for s in r.stage_rates}
        xs = [i + (j - (len(rows) - 1) / 2) * width for i in range(len(stages))]
        vals = [by[s].rate if s in by else 0.0 for s in stages]
        lo = [v - by[s].low if s in by else 0.0 for s, v in zip(stages, vals, strict=True)]
        hi = [by[s].high - v if s in by else 0.0 for s, v in zip(stages, vals, strict=True)]
        ax.bar(
            xs,
            vals,
            width,
            yerr=[lo, hi],
            capsize=3,
            label=f"{r.method} (n={r.true_positives_with_stage})",
        )
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels([f"stage {s}" for s in stages])
    ax.set_ylabel("share of true positives")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{summary.dataset}: error stages of true positives (95% CI)")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    try:
        return _save(fig, Path(stem), formats)
    finally:
        plt.close(fig)
