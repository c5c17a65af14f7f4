"""What ``veritrail eval injected:DIR`` reports (docs/inject.md#what-eval-reports).

Per method, over the dataset of `eval.datasets.injected`:

* **recall**: the share of injected claims it labels Not Fully Supported, overall, per kind and
  per gold stage;
* **stage accuracy**: among the injected claims it caught with an identified error stage
  ("localised"), the share whose stages are exactly the gold stage; the others are **too early**
  (its earliest named stage is before the gold stage) or **too late** (the rest);
* **node accuracy**: among the localised claims, the share whose blamed nodes are exactly the
  injected node (blamed nodes: `report.blamed_nodes`'s rule for VeriTrail, the detector's
  ``detail["blamed_nodes"]`` for the stage baseline);
* **false alarms**: the share of untouched claims whose verdict differs from the same method's
  verdict on the same claim of the clean DAG;
* calls and input/output tokens per claim (every claim it answered, the clean ones included).

Every share comes with a 95% percentile bootstrap interval: a share k/n resampled is a binomial
draw (`runs.diffstats.binomial`, seeded, the same on every platform).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..detectors.base import Detection
from ..records import ClaimResult, ErrorStageStatus, Verdict
from ..report import blamed_nodes as report_blamed_nodes
from ..report import claim_to_dict
from ..runs.diffstats import binomial
from .datasets.injected import ROLE
from .runner import EvalRun

NFS = Verdict.NOT_FULLY_SUPPORTED


@dataclass(frozen=True, slots=True)
class Share:
    """k of n, its value (None when n is 0) and a 95% bootstrap interval."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, Any]:
        """The share as JSON (values rounded to 4 places)."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "k": self.k,
            "n": self.n,
            "value": r(self.value),
            "low": r(self.low),
            "high": r(self.high),
        }


def share(k: int, n: int, *, resamples: int = 1000, seed: int = 0) -> Share:
    """k/n with its percentile bootstrap interval (binomial resampling; numpy's percentile rule)."""
    if n <= 0:
        return Share(k, n, None, None, None)
    p = k / n
    if resamples <= 0:
        return Share(k, n, p, None, None)
    rng = random.Random(seed)
    draws = sorted(binomial(rng, n, p) / n for _ in range(resamples))

    def pct(q: float) -> float:
        pos = q * (len(draws) - 1)
        i = int(pos)
        j = min(i + 1, len(draws) - 1)
        return draws[i] + (draws[j] - draws[i]) * (pos - i)

    return Share(k, n, p, pct(0.025), pct(0.975))


@dataclass(frozen=True, slots=True)
class InjectedRow:
    """One method's figures."""

    method: str
    recall: Share
    recall_by_kind: dict[str, Share]
    recall_by_stage: dict[int, Share]
    localised: int
    stage_exact: Share
    stage_by_kind: dict[str, Share]
    """Stage accuracy among the localised claims of each kind."""
    too_early: Share
    too_late: Share
    node_exact: Share
    false_alarm: Share
    claims: int
    calls_per_claim: float
    input_tokens_per_claim: float
    output_tokens_per_claim: float
    failures: int

    def to_json(self) -> dict[str, Any]:
        """The row as JSON."""
        return {
            "method": self.method,
            "recall": self.recall.to_json(),
            "recall_by_kind": {k: s.to_json() for k, s in self.recall_by_kind.items()},
            "recall_by_stage": {str(k): s.to_json() for k, s in self.recall_by_stage.items()},
            "localised": self.localised,
            "stage_accuracy": self.stage_exact.to_json(),
            "stage_accuracy_by_kind": {k: s.to_json() for k, s in self.stage_by_kind.items()},
            "too_early": self.too_early.to_json(),
            "too_late": self.too_late.to_json(),
            "node_accuracy": self.node_exact.to_json(),
            "false_alarm_rate": self.false_alarm.to_json(),
            "claims": self.claims,
            "calls_per_claim": round(self.calls_per_claim, 4),
            "input_tokens_per_claim": round(self.input_tokens_per_claim, 2),
            "output_tokens_per_claim": round(self.output_tokens_per_claim, 2),
            "failures": self.failures,
        }


@dataclass(frozen=True, slots=True)
class InjectedSummary:
    """Every method's figures on one injected dataset."""

    dataset: str
    injected: int
    untouched: int
    by_kind: dict[str, int]
    by_stage: dict[int, int]
    rows: tuple[InjectedRow, ...]
    label: str | None = None
    """A note shown with the figures (a demonstration model's ``DEMO_LABEL``)."""

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON (``veritrail eval injected:DIR --format json``)."""
        return {
            "dataset": self.dataset,
            "injected_claims": self.injected,
            "untouched_claims": self.untouched,
            "injected_by_kind": self.by_kind,
            "injected_by_stage": {str(k): v for k, v in self.by_stage.items()},
            **({"label": self.label} if self.label else {}),
            "methods": [r.to_json() for r in self.rows],
        }


def summarize_injected(
    run: EvalRun,
    *,
    roots: Mapping[str, frozenset[str]] | None = None,
    terminals: Mapping[str, str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    label: str | None = None,
) -> InjectedSummary:
    """The figures of every method of `run` (an `EvalRun` over an injected dataset).

    `roots` and `terminals` give each item's root ids and terminal id (by item id), so the
    blamed nodes of VeriTrail follow the report's rule exactly.
    """
    injected = [(k, g) for k, g in run.gold.items() if g.meta.get(ROLE) == "injected"]
    untouched = [(k, g) for k, g in run.gold.items() if g.meta.get(ROLE) == "untouched"]
    kinds = sorted({str(g.meta["kind"]) for _, g in injected})
    stages = sorted({int(g.meta["stage"]) for _, g in injected})

    def s(k: int, n: int) -> Share:
        return share(k, n, resamples=resamples, seed=seed)

    rows: list[InjectedRow] = []
    for m in run.methods:
        preds = run.predictions[m]
        caught = {k for k, _ in injected if preds[k].verdict == NFS}
        by_kind = {
            kind: s(
                sum(1 for k, g in injected if g.meta["kind"] == kind and k in caught),
                sum(1 for _, g in injected if g.meta["kind"] == kind),
            )
            for kind in kinds
        }
        by_stage = {
            st: s(
                sum(1 for k, g in injected if g.meta["stage"] == st and k in caught),
                sum(1 for _, g in injected if g.meta["stage"] == st),
            )
            for st in stages
        }
        exact = early = late = node_ok = 0
        localised = 0
        kind_exact: dict[str, list[int]] = {kind: [0, 0] for kind in kinds}
        for k, g in injected:
            d = preds[k]
            if k not in caught or d.error_stage_status is not ErrorStageStatus.IDENTIFIED:
                continue
            if not d.error_stages:
                continue
            localised += 1
            gold_stage = int(g.meta["stage"])
            named = set(d.error_stages)
            kind_exact[str(g.meta["kind"])][1] += 1
            if named == {gold_stage}:
                exact += 1
                kind_exact[str(g.meta["kind"])][0] += 1
            elif min(named) < gold_stage:
                early += 1
            else:
                late += 1
            item = k.rsplit("/", 1)[0]
            blamed = blamed_nodes(
                d, (roots or {}).get(item, frozenset()), (terminals or {}).get(item)
            )
            if set(blamed) == {g.meta["node"]}:
                node_ok += 1
        changed = compared = 0
        for k, g in untouched:
            mine, clean = preds.get(k), preds.get(str(g.meta["clean"]))
            if mine is None or clean is None or mine.verdict is None or clean.verdict is None:
                continue
            compared += 1
            changed += mine.verdict != clean.verdict
        n = max(1, len(preds))
        rows.append(
            InjectedRow(
                method=m,
                recall=s(len(caught), len(injected)),
                recall_by_kind=by_kind,
                recall_by_stage=by_stage,
                localised=localised,
                stage_exact=s(exact, localised),
                stage_by_kind={kind: s(k_, n_) for kind, (k_, n_) in kind_exact.items()},
                too_early=s(early, localised),
                too_late=s(late, localised),
                node_exact=s(node_ok, localised),
                false_alarm=s(changed, compared),
                claims=len(preds),
                calls_per_claim=sum(p.lm_calls for p in preds.values()) / n,
                input_tokens_per_claim=sum(p.input_tokens for p in preds.values()) / n,
                output_tokens_per_claim=sum(p.output_tokens for p in preds.values()) / n,
                failures=sum(1 for p in preds.values() if p.error),
            )
        )
    return InjectedSummary(
        dataset=run.dataset,
        injected=len(injected),
        untouched=len(untouched),
        by_kind={kind: sum(1 for _, g in injected if g.meta["kind"] == kind) for kind in kinds},
        by_stage={st: sum(1 for _, g in injected if g.meta["stage"] == st) for st in stages},
        rows=tuple(rows),
        label=label,
    )


def blamed_nodes(d: Detection, roots: frozenset[str], terminal: str | None) -> tuple[str, ...]:
    """The nodes a detection blames for its error stage (none when it names no stage); `roots`
    and `terminal` are its DAG's."""
    if d.error_stage_status is not ErrorStageStatus.IDENTIFIED:
        return ()
    given = d.detail.get("blamed_nodes")
    if isinstance(given, list):
        return tuple(str(n) for n in given)
    r = d.native
    if isinstance(r, ClaimResult):
        # The report's rule (the viewer's red ring), on the claim as the report writes it.
        claim = claim_to_dict(r)
        return report_blamed_nodes(claim, set(roots), terminal or "")
    return ()


def _fmt(x: Share, *, ci: bool = True) -> str:
    if x.value is None:
        return "—"
    text = f"{x.value:.2f}"
    if ci and x.low is not None and x.high is not None:
        text += f" [{x.low:.2f}, {x.high:.2f}]"
    return text + f" ({x.k}/{x.n})"


def table_rows(summary: InjectedSummary) -> tuple[list[str], list[list[str]]]:
    """The main table: header and one row per method."""
    header = [
        "method",
        "recall",
        "stage acc.",
        "too early",
        "too late",
        "node acc.",
        "false alarms",
        "calls/claim",
        "tokens in/out per claim",
    ]
    rows = [
        [
            r.method,
            _fmt(r.recall),
            _fmt(r.stage_exact),
            _fmt(r.too_early, ci=False),
            _fmt(r.too_late, ci=False),
            _fmt(r.node_exact),
            _fmt(r.false_alarm),
            f"{r.calls_per_claim:.2f}",
            f"{r.input_tokens_per_claim:.0f} / {r.output_tokens_per_claim:.0f}",
        ]
        for r in summary.rows
    ]
    return header, rows


def recall_rows(summary: InjectedSummary) -> tuple[list[str], list[list[str]]]:
    """The recall table: one column per kind and per gold stage."""
    kinds = list(summary.by_kind)
    stages = list(summary.by_stage)
    header = ["method", *kinds, *(f"stage {s}" for s in stages)]
    rows = [
        [
            r.method,
            *(_fmt(r.recall_by_kind[k], ci=False) for k in kinds),
            *(_fmt(r.recall_by_stage[s], ci=False) for s in stages),
        ]
        for r in summary.rows
    ]
    return header, rows


def stage_rows(summary: InjectedSummary) -> tuple[list[str], list[list[str]]]:
    """Stage accuracy per kind (methods that name a stage only)."""
    kinds = list(summary.by_kind)
    header = ["method", *kinds]
    rows = [
        [r.method, *(_fmt(r.stage_by_kind[k], ci=False) for k in kinds)]
        for r in summary.rows
        if r.localised
    ]
    return header, rows


def _caption(summary: InjectedSummary) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in summary.by_kind.items())
    stages = ", ".join(f"stage {s}: {n}" for s, n in summary.by_stage.items())
    text = (
        f"{summary.dataset}: {summary.injected} injected claims ({kinds}; {stages}), "
        f"{summary.untouched} untouched claims; 95% bootstrap intervals"
    )
    return text + (f" — verdicts: {summary.label}" if summary.label else "")


def render_markdown(summary: InjectedSummary) -> str:
    """Both tables as Markdown (the docs' figures)."""

    def md(header: list[str], rows: Iterable[list[str]]) -> str:
        lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines) + "\n"

    return (
        _caption(summary)
        + "\n\n"
        + md(*table_rows(summary))
        + "\n"
        + md(*recall_rows(summary))
        + "\n"
        + md(*stage_rows(summary))
    )


def render_terminal(summary: InjectedSummary) -> Any:
    """Both tables as one rich renderable."""
    from rich.console import Group
    from rich.table import Table

    def table(title: str | None, header: list[str], rows: list[list[str]]) -> Table:
        t = Table(title=title, title_justify="left")
        for h in header:
            t.add_column(h, overflow="fold")
        for row in rows:
            t.add_row(*row)
        return t

    return Group(
        table(_caption(summary), *table_rows(summary)),
        table("recall of injected claims per kind and per gold stage", *recall_rows(summary)),
        table("stage accuracy per kind (localised claims)", *stage_rows(summary)),
    )


__all__ = [
    "InjectedRow",
    "InjectedSummary",
    "Share",
    "blamed_nodes",
    "render_markdown",
    "render_terminal",
    "share",
    "stage_rows",
    "summarize_injected",
    "table_rows",
]
