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
* calls and input/output tokens per claim (every claim it answered, the clean ones included);
* **stage accuracy per DAG** (the sub-folders of a benchmark: the agent run's among them);
* on the citation kinds (``wrong-citation``, ``dropped-citation``: gold Fully Supported with a
  gold citation status), **citation-status accuracy**: the share whose citation status, computed
  by `citations.attach_citations` exactly as ``--citations auto`` does, equals the gold status;
  the share labelled Fully Supported; and **citation false alarms**: the share of untouched cited
  claims (a marker in their sentence) whose status says the citation points away from the
  evidence (*misattributed* or *cited source does not support it*). Only methods whose answers
  carry VeriTrail's provenance (`ClaimResult`) have citation statuses; the others show "—".

Recall, stage and node accuracy count the content kinds only (the citation kinds plant nothing
unsupported).

Every share comes with a 95% percentile bootstrap interval: a share k/n resampled is a binomial
draw (`runs.diffstats.binomial`, seeded, the same on every platform).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..citations import AUTO, attach_citations
from ..dag import load_dag
from ..detectors.base import Detection
from ..records import CitationStatus, ClaimResult, ErrorStageStatus, Verdict
from ..report import as_claim, claim_to_dict
from ..report import blamed_nodes as report_blamed_nodes
from ..runs.diffstats import binomial
from .datasets.injected import CITED_DAG, ROLE, SOURCE
from .runner import EvalRun

NFS = Verdict.NOT_FULLY_SUPPORTED
FS = Verdict.FULLY_SUPPORTED


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
    stage_by_dag: dict[str, Share]
    """Stage accuracy among the localised claims of each DAG (benchmark sub-folder)."""
    citation_accuracy: Share | None
    """Citation-status accuracy on the citation kinds' claims; None: the method gives no
    citation status."""
    citation_by_kind: dict[str, Share]
    citation_labelled_fs: Share
    """The share of the citation kinds' claims (true claims) labelled Fully Supported."""
    citation_false_alarm: Share | None
    """Untouched cited claims whose status is miscited; None: no citation status."""
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
            "stage_accuracy_by_dag": {k: s.to_json() for k, s in self.stage_by_dag.items()},
            "citation_status_accuracy": (
                self.citation_accuracy.to_json() if self.citation_accuracy else None
            ),
            "citation_status_accuracy_by_kind": {
                k: s.to_json() for k, s in self.citation_by_kind.items()
            },
            "citation_claims_labelled_fully_supported": self.citation_labelled_fs.to_json(),
            "citation_false_alarm_rate": (
                self.citation_false_alarm.to_json() if self.citation_false_alarm else None
            ),
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
    citation_by_kind: dict[str, int] | None = None
    """Claims of each citation kind (none when the dataset has no cited DAG)."""
    by_dag: dict[str, int] | None = None
    """Injected claims of the content kinds per DAG."""
    """A note shown with the figures (a demonstration model's ``DEMO_LABEL``)."""

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON (``veritrail eval injected:DIR --format json``)."""
        return {
            "dataset": self.dataset,
            "injected_claims": self.injected,
            "untouched_claims": self.untouched,
            "injected_by_kind": self.by_kind,
            "injected_by_stage": {str(k): v for k, v in self.by_stage.items()},
            "injected_by_dag": self.by_dag or {},
            "citation_claims_by_kind": self.citation_by_kind or {},
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
    planted = [(k, g) for k, g in run.gold.items() if g.meta.get(ROLE) == "injected"]
    injected = [(k, g) for k, g in planted if "citation" not in g.meta]
    cite_claims = [(k, g) for k, g in planted if "citation" in g.meta]
    cite_kinds = sorted({str(g.meta["kind"]) for _, g in cite_claims})
    dag_names = list(dict.fromkeys(str(g.meta.get(SOURCE, "")) for _, g in injected))
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
        dag_exact: dict[str, list[int]] = {name: [0, 0] for name in dag_names}
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
            dag_exact[str(g.meta.get(SOURCE, ""))][1] += 1
            if named == {gold_stage}:
                exact += 1
                kind_exact[str(g.meta["kind"])][0] += 1
                dag_exact[str(g.meta.get(SOURCE, ""))][0] += 1
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
        statuses = citation_statuses(run, m)
        if statuses is None:
            cite_acc: Share | None = None
            cite_alarm: Share | None = None
            cite_by_kind: dict[str, Share] = {}
        else:
            ok = [k for k, g in cite_claims if _status_value(statuses.get(k)) == g.meta["citation"]]
            cite_acc = s(len(ok), len(cite_claims))
            cite_by_kind = {
                kind: s(
                    sum(1 for k, g in cite_claims if g.meta["kind"] == kind and k in ok),
                    sum(1 for _, g in cite_claims if g.meta["kind"] == kind),
                )
                for kind in cite_kinds
            }
            marked = [
                statuses[k]
                for k, g in untouched
                if statuses.get(k) not in (None, CitationStatus.UNCITED)
            ]
            cite_alarm = s(sum(1 for st in marked if st is not None and st.miscited), len(marked))
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
                stage_by_dag={name: s(k_, n_) for name, (k_, n_) in dag_exact.items()},
                citation_accuracy=cite_acc,
                citation_by_kind=cite_by_kind,
                citation_labelled_fs=s(
                    sum(1 for k, _ in cite_claims if preds[k].verdict == FS), len(cite_claims)
                ),
                citation_false_alarm=cite_alarm,
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
        citation_by_kind=(
            {kind: sum(1 for _, g in cite_claims if g.meta["kind"] == kind) for kind in cite_kinds}
            if any(CITED_DAG in g.meta for g in run.gold.values())
            else None
        ),
        by_dag={
            name: sum(1 for _, g in injected if str(g.meta.get(SOURCE, "")) == name)
            for name in dag_names
        },
    )


def _status_value(status: CitationStatus | None) -> str | None:
    return status.value if status is not None else None


def citation_statuses(run: EvalRun, method: str) -> dict[str, CitationStatus | None] | None:
    """Each cited claim's citation status under `method` (claim key → status; None for a claim
    with no verdict), computed by `citations.attach_citations` (``--citations auto``) on the
    claim's DAG; None when the method gives no citation status (its answers carry no
    VeriTrail provenance)."""
    preds = run.predictions[method]
    groups: dict[str, list[str]] = {}
    for k, g in run.gold.items():
        path = g.meta.get(CITED_DAG)
        if path and k in preds:
            groups.setdefault(str(path), []).append(k)
    if not any(isinstance(preds[k].native, ClaimResult) for keys in groups.values() for k in keys):
        return None
    out: dict[str, CitationStatus | None] = {}
    for path, keys in groups.items():
        answered = [k for k in keys if isinstance(preds[k].native, ClaimResult)]
        out.update({k: None for k in keys})
        if not answered:
            continue
        report = {"claims": [claim_to_dict(preds[k].native) for k in answered]}
        checked = attach_citations(report, load_dag(path), AUTO)
        # Each claim read back typed (`report.as_claim`), as every reader of reports reads one.
        for k, claim in zip(answered, map(as_claim, checked["claims"]), strict=True):
            out[k] = claim.citation.kind if claim.citation is not None else None
    return out


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


def dag_stage_rows(summary: InjectedSummary) -> tuple[list[str], list[list[str]]]:
    """Stage accuracy per DAG (methods that name a stage only)."""
    names = list(summary.by_dag or {})
    header = ["method", *names]
    rows = [
        [r.method, *(_fmt(r.stage_by_dag[n], ci=False) for n in names)]
        for r in summary.rows
        if r.localised
    ]
    return header, rows


def citation_rows(summary: InjectedSummary) -> tuple[list[str], list[list[str]]]:
    """The citation table: citation-status accuracy (overall with its interval, per citation
    kind), the share of those true claims labelled Fully Supported, citation false alarms."""
    kinds = list(summary.citation_by_kind or {})
    header = [
        "method",
        "citation-status acc.",
        *kinds,
        "labelled Fully Supported",
        "citation false alarms",
    ]

    def opt(x: Share | None, *, ci: bool = True) -> str:
        return "—" if x is None else _fmt(x, ci=ci)

    rows = [
        [
            r.method,
            opt(r.citation_accuracy),
            *(
                opt(r.citation_by_kind.get(k) if r.citation_accuracy else None, ci=False)
                for k in kinds
            ),
            _fmt(r.citation_labelled_fs, ci=False),
            opt(r.citation_false_alarm),
        ]
        for r in summary.rows
    ]
    return header, rows


NO_STAGE = (
    "stage accuracy: no method caught a claim with a stage "
    "(RAG and direct give a verdict without one)"
)
"""Said in place of the two stage tables when no method localised a claim: a table of headers
with no row reads like a failure."""


def _any_localised(summary: InjectedSummary) -> bool:
    return any(r.localised for r in summary.rows)


NO_CITATION = (
    "citations: nothing to measure here (no citation claim, and no method gave an untouched "
    "cited claim a citation status)"
)
"""Said in place of a citation table whose every figure would be a dash."""


def _any_figure(rows: list[list[str]]) -> bool:
    return any(cell != "—" for row in rows for cell in row[1:])


def _caption(summary: InjectedSummary) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in summary.by_kind.items())
    stages = ", ".join(f"stage {s}: {n}" for s, n in summary.by_stage.items())
    cites = ", ".join(f"{k} {n}" for k, n in (summary.citation_by_kind or {}).items())
    text = (
        f"{summary.dataset}: {summary.injected} injected claims"
        + (f" ({kinds}; {stages})" if summary.injected else "")
        + ", "
        + (
            f"{sum((summary.citation_by_kind or {}).values())} citation claims ({cites}), "
            if cites
            else ""
        )
        + f"{summary.untouched} untouched claims; 95% bootstrap intervals"
    )
    return text + (f" — verdicts: {summary.label}" if summary.label else "")


def render_markdown(summary: InjectedSummary) -> str:
    """Both tables as Markdown (the docs' figures)."""

    def md(header: list[str], rows: Iterable[list[str]]) -> str:
        lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines) + "\n"

    localised, cite = _any_localised(summary), citation_rows(summary)
    return (
        _caption(summary)
        + "\n\n"
        + md(*table_rows(summary))
        + "\n"
        + md(*recall_rows(summary))
        + "\n"
        + (md(*stage_rows(summary)) if localised else NO_STAGE + "\n")
        + (
            "\n" + md(*dag_stage_rows(summary))
            if len(summary.by_dag or {}) > 1 and localised
            else ""
        )
        + (
            "\n" + (md(*cite) if _any_figure(cite[1]) else NO_CITATION + "\n")
            if summary.citation_by_kind is not None
            else ""
        )
    )


def render_terminal(summary: InjectedSummary) -> Any:
    """Both tables as one rich renderable."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    def table(title: str | None, header: list[str], rows: list[list[str]]) -> Table:
        t = Table(title=title, title_justify="left")
        for h in header:
            t.add_column(h, overflow="fold")
        for row in rows:
            t.add_row(*row)
        return t

    parts: list[Table | Text] = [
        table(_caption(summary), *table_rows(summary)),
        table("recall of injected claims per kind and per gold stage", *recall_rows(summary)),
    ]
    if not _any_localised(summary):
        parts.append(Text(NO_STAGE))
    else:
        parts.append(table("stage accuracy per kind (localised claims)", *stage_rows(summary)))
        if len(summary.by_dag or {}) > 1:
            parts.append(
                table("stage accuracy per DAG (localised claims)", *dag_stage_rows(summary))
            )
    cite = citation_rows(summary)
    if summary.citation_by_kind is not None and not _any_figure(cite[1]):
        parts.append(Text(NO_CITATION))
    elif summary.citation_by_kind is not None:
        parts.append(
            table(
                "citations: status accuracy on the citation kinds, false alarms on untouched "
                "cited claims",
                *cite,
            )
        )
    return Group(*parts)


__all__ = [
    "InjectedRow",
    "InjectedSummary",
    "Share",
    "blamed_nodes",
    "citation_rows",
    "citation_statuses",
    "dag_stage_rows",
    "render_markdown",
    "render_terminal",
    "share",
    "stage_rows",
    "summarize_injected",
    "table_rows",
]
