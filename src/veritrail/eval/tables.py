"""The results table (rows = methods, columns = metrics, like the paper's Table 1).

Three renderings of the same `EvalSummary`: a rich table for the terminal, Markdown, and JSON
(the JSON also carries the exclusion counts, error-stage analysis and, optionally, every
prediction). Percentages are shown with one decimal, as in the paper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..detectors.base import detection_to_json
from .metrics import StageRate
from .runner import EvalRun, EvalSummary, MethodRow

RESULTS_VERSION = 1

Cell = Callable[[MethodRow], str]

DOLLARS_COLUMN = "$/claim"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _num(v: float, digits: int = 1) -> str:
    return f"{v:,.{digits}f}"


COLUMNS: list[tuple[str, Cell]] = [
    ("Method", lambda r: r.method),
    ("n", lambda r: str(r.hard.n)),
    ("Macro F1", lambda r: _pct(r.hard.macro_f1)),
    ("Bal. Acc.", lambda r: _pct(r.hard.balanced_accuracy)),
    ("P FS", lambda r: _pct(r.hard.fs.precision if r.hard.fs else None)),
    ("R FS", lambda r: _pct(r.hard.fs.recall if r.hard.fs else None)),
    ("P NFS", lambda r: _pct(r.hard.nfs.precision if r.hard.nfs else None)),
    ("R NFS", lambda r: _pct(r.hard.nfs.recall if r.hard.nfs else None)),
    ("AUROC", lambda r: "–" if r.auroc is None else f"{r.auroc:.2f}"),
    ("Ev. P", lambda r: _pct(r.evidence_precision)),
    ("Ev. R", lambda r: _pct(r.evidence_recall)),
    ("Calls/claim", lambda r: _num(r.calls_per_claim)),
    ("Tokens/claim", lambda r: _num(r.input_tokens_per_claim + r.output_tokens_per_claim, 0)),
    (DOLLARS_COLUMN, lambda r: f"{r.dollars_per_claim:.4f}"),
    ("Nodes read", lambda r: _pct(r.nodes_read_share) + "%"),
]


def table_rows(
    summary: EvalSummary, *, unpriced: Sequence[str] = ()
) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells. `unpriced`: models with no known price; a method that called
    one shows "unknown" dollars, not the 0 its calls counted (methods without calls keep 0)."""
    head = [c for c, _ in COLUMNS]
    rows = []
    for r in summary.rows:
        cells = [f(r) for _, f in COLUMNS]
        if unpriced and r.calls_per_claim > 0:
            cells[head.index(DOLLARS_COLUMN)] = "unknown"
        rows.append(cells)
    return head, rows


def _notes(summary: EvalSummary, unpriced: Sequence[str] = ()) -> list[str]:
    ex = summary.exclusion
    gold = ", ".join(f"{k}: {v}" for k, v in sorted(summary.gold.items()))
    notes = [
        f"Dataset {summary.dataset}: {summary.claims} claims ({gold}).",
        f"Hard-prediction metrics (%) over {len(ex.kept)} claims; excluded: {len(ex.inconclusive)} "
        f"labelled Inconclusive by some method, {len(ex.no_verdict)} without a verdict from some "
        f"method, {len(ex.gold_not_binary)} with a non-binary gold label.",
    ]
    if summary.auroc_claims:
        notes.append(f"AUROC over {summary.auroc_claims} claims that every scoring method scored.")
    notes.append(
        "Ev. P / Ev. R: evidence precision against the union of gold sets / recall against the "
        "best-matching gold set, mean over claims with gold evidence (RAG and Direct: every sentence "
        "of the roots they passed on)."
    )
    if unpriced:
        notes.append(
            f"$/claim unknown: no price known for {', '.join(unpriced)} (add it with --prices; "
            "docs/models.md)."
        )
    return notes


def render_markdown(summary: EvalSummary, *, unpriced: Sequence[str] = ()) -> str:
    """The table and the error-stage analysis as Markdown (`unpriced`: as in `table_rows`)."""
    head, rows = table_rows(summary, unpriced=unpriced)
    lines = [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(head))) + " |",
        *("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows),
        "",
        *(f"- {n}" for n in _notes(summary, unpriced)),
    ]
    stage_lines = _stage_markdown(summary)
    if stage_lines:
        lines += ["", *stage_lines]
    return "\n".join(lines) + "\n"


def _fmt_rates(rates: Sequence[StageRate]) -> str:
    return (
        "; ".join(f"stage {r.stage}: {r.rate:.2f} [{r.low:.2f}, {r.high:.2f}]" for r in rates)
        or "–"
    )


def _stage_markdown(summary: EvalSummary) -> list[str]:
    rows = [r for r in summary.rows if r.stage_rates or r.true_positives_with_stage]
    if not rows:
        return []
    out = [
        "Error stages of true positives (share naming each stage, bootstrap 95% CI):",
        "",
        "| Method | TP with stage | Rates |",
        "| --- | ---: | --- |",
    ]
    out += [
        f"| {r.method} | {r.true_positives_with_stage} | {_fmt_rates(r.stage_rates)} |"
        for r in rows
    ]
    if summary.pooled_stages:
        out += [
            "",
            f"Pooled over methods (weighted by true positives): {_fmt_rates(summary.pooled_stages)}",
        ]
    for p in summary.stage_pairs:
        js = "–" if p.jensen_shannon is None else f"{p.jensen_shannon:.3f}"
        sp = "–" if p.spearman is None else f"{p.spearman:.2f}"
        out.append(f"- {p.a} vs {p.b}: Jensen–Shannon divergence {js}, Spearman {sp}")
    return out


def render_terminal(summary: EvalSummary, *, unpriced: Sequence[str] = ()) -> Any:
    """A rich renderable (table plus notes) for the console (`unpriced`: as in `table_rows`)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head, rows = table_rows(summary, unpriced=unpriced)
    t = Table(title=f"veritrail eval — {summary.dataset}", show_lines=False)
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True, min_width=len(h))
    for row in rows:
        t.add_row(*row)
    parts: list[Any] = [t, *(Text(n, style="dim") for n in _notes(summary, unpriced))]
    staged = [r for r in summary.rows if r.stage_rates or r.true_positives_with_stage]
    if staged:
        st = Table(
            title="Error stages of true positives (share naming each stage, bootstrap 95% CI)"
        )
        st.add_column("Method")
        st.add_column("TP with stage", justify="right")
        st.add_column("Rates")
        for r in staged:
            st.add_row(r.method, str(r.true_positives_with_stage), _fmt_rates(r.stage_rates))
        if len(staged) > 1 and summary.pooled_stages:
            n_tp = sum(r.true_positives_with_stage for r in staged)
            st.add_row("pooled", str(n_tp), _fmt_rates(summary.pooled_stages))
        parts.append(st)
        for p in summary.stage_pairs:
            js = "–" if p.jensen_shannon is None else f"{p.jensen_shannon:.3f}"
            sp = "–" if p.spearman is None else f"{p.spearman:.2f}"
            parts.append(Text(f"{p.a} vs {p.b}: Jensen–Shannon divergence {js}, Spearman {sp}"))
    return Group(*parts)


def _rates_json(rates: Sequence[StageRate]) -> list[dict[str, Any]]:
    return [{"stage": r.stage, "rate": r.rate, "ci95": [r.low, r.high]} for r in rates]


def _row_json(r: MethodRow) -> dict[str, Any]:
    h = r.hard
    return {
        "method": r.method,
        "claims": r.claims,
        "hard": {
            "n": h.n,
            "macro_f1": h.macro_f1,
            "balanced_accuracy": h.balanced_accuracy,
            "accuracy": h.accuracy,
            **{
                name: None
                if cs is None
                else {
                    "precision": cs.precision,
                    "recall": cs.recall,
                    "f1": cs.f1,
                    "support": cs.support,
                }
                for name, cs in (("fully_supported", h.fs), ("not_fully_supported", h.nfs))
            },
        },
        "auroc": r.auroc,
        "auroc_n": r.auroc_n,
        "evidence": {
            "precision": r.evidence_precision,
            "recall": r.evidence_recall,
            "n": r.evidence_n,
        },
        "cost_per_claim": {
            "lm_calls": r.calls_per_claim,
            "input_tokens": r.input_tokens_per_claim,
            "output_tokens": r.output_tokens_per_claim,
            "dollars": r.dollars_per_claim,
        },
        "nodes_read_share": r.nodes_read_share,
        "verdicts": r.verdicts,
        "failures": r.failures,
        "error_stages": {
            "true_positives": r.true_positives_with_stage,
            "rates": _rates_json(r.stage_rates),
        },
    }


def summary_to_json(summary: EvalSummary, run: EvalRun | None = None) -> dict[str, Any]:
    """The whole summary as JSON; with `run`, every prediction and gold label too."""
    ex = summary.exclusion
    doc: dict[str, Any] = {
        "version": RESULTS_VERSION,
        "dataset": summary.dataset,
        "claims": summary.claims,
        "gold": summary.gold,
        "meta": summary.meta,
        "excluded": {
            "kept": len(ex.kept),
            "inconclusive": len(ex.inconclusive),
            "no_verdict": len(ex.no_verdict),
            "gold_not_binary": len(ex.gold_not_binary),
            "inconclusive_claims": [str(k) for k in ex.inconclusive],
            "no_verdict_claims": [str(k) for k in ex.no_verdict],
        },
        "auroc_claims": summary.auroc_claims,
        "methods": [_row_json(r) for r in summary.rows],
        "error_stages": {
            "pooled": _rates_json(summary.pooled_stages),
            "pairs": [
                {"a": p.a, "b": p.b, "jensen_shannon": p.jensen_shannon, "spearman": p.spearman}
                for p in summary.stage_pairs
            ],
        },
    }
    if run is not None:
        doc["gold_labels"] = {k: g.label.value for k, g in run.gold.items()}
        doc["predictions"] = [
            detection_to_json(p) for m in run.methods for p in run.predictions[m].values()
        ]
    return doc
