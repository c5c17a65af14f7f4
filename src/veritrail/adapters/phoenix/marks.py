"""A finished run's verdicts as marks on the spans of the trace it verified: what the Phoenix
annotations and the Langfuse scores both write (docs/adapters.md, "Verdicts back onto the trace").

Two kinds of mark, each naming its claim by a stable identifier so a second export replaces the
first instead of adding to it:

* **verdict** (`VERDICT_NAME`), on the span of the final output (the terminal node's span): one
  per claim, label = the verdict, score = the claim's score (soft prediction) or 1 / 0.5 / 0 for
  Fully Supported / Inconclusive / Not Fully Supported, explanation = the model's reasoning;
* **unsupported content** (`ORIGIN_NAME`), for a claim judged Not Fully Supported whose error
  stage could be named: on each span of the nodes blamed for it (docs/report.md: the non-root
  nodes that gave evidence in the last Fully Supported round, or the final output when no round
  was), naming the claim and the evidence trail;
* **citation** (`CITATION_NAME`), for a run with `--citations` (docs/citations.md), on the span of
  the final output: one per claim with a citation status, label = the status
  (`supported_by_cited`, `misattributed`, ...), score = 1 when a cited source holds its evidence,
  0 when the citation points away from it (misattributed, cited_not_supporting), none otherwise,
  explanation = the markers, the nodes they cite and the nodes that hold its evidence.

Span ids and the trace id come from the DAG's ``meta`` (``original_spans``, ``trace_id``), as
`veritrail from-trace` (file or Phoenix) writes them. Every text is redacted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...dag import Dag, DagValidationError, load_dag
from ...display import shorten
from ...errors import InputProblem
from ...records import CitationStatus, ErrorStageStatus, Verdict
from ...redaction import redact, redact_obj
from ...report import (
    ClaimSource,
    ReportSource,
    as_claim,
    as_report,
    report_header_problem,
)
from ...report_model import ClaimDoc, ReportContractError, ReportDoc
from ...textio import InputError, read_input_text

VERDICT_NAME = "veritrail"
"""Name of the per-claim verdict marks (Phoenix annotation name, Langfuse score name)."""
ORIGIN_NAME = "veritrail unsupported content"
"""Name of the marks on the spans where unsupported content most likely entered."""
ORIGIN_LABEL = "unsupported content entered here"
CITATION_NAME = "veritrail.citation"
"""Name of the per-claim citation-status marks (runs with `--citations`)."""

CITATION_SCORES: Mapping[str, float | None] = {
    CitationStatus.SUPPORTED_BY_CITED.value: 1.0,
    CitationStatus.MISATTRIBUTED.value: 0.0,
    CitationStatus.CITED_NOT_SUPPORTING.value: 0.0,
    CitationStatus.UNSUPPORTED.value: None,
    CitationStatus.UNCITED.value: None,
}
"""The score of a citation status: whether the citation points at the evidence (none when the
status says nothing about the citation: no evidence anywhere, or no marker)."""
ERROR_LABEL = "Could not verify"
"""Label of a claim that ended in error (no verdict)."""

VERDICT_SCORES: Mapping[str, float] = {
    Verdict.FULLY_SUPPORTED.value: 1.0,
    Verdict.INCONCLUSIVE.value: 0.5,
    Verdict.NOT_FULLY_SUPPORTED.value: 0.0,
}
"""The score of a verdict when the claim has no soft-prediction score."""


class ExportInputError(InputProblem):
    """The run cannot be exported (no report, or its DAG holds no span ids)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One annotation / score to write on one span of one trace."""

    name: str
    trace_id: str
    span_id: str
    identifier: str
    """Stable per claim (and span): the key that makes a second export an update."""
    label: str
    score: float | None
    explanation: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunForExport:
    """What an export reads from a run: its report and the DAG it verified."""

    report: ReportDoc
    dag: Dag
    where: str


def load_run(run: str | Path, dag_path: str | Path | None = None) -> RunForExport:
    """A run directory (or a report file) and its DAG: the run's own copy (`dag.json` in the run
    directory, for a DAG read from Phoenix) or the file the report names, unless `dag_path`
    is given. `ExportInputError` when one cannot be read."""
    p = Path(run)
    report_path = p / "report.json" if p.is_dir() else p
    if p.is_dir() and not report_path.is_file():
        raise ExportInputError(
            f"{p}: no report.json: the run has not finished (run `veritrail resume {p}` first)"
        )
    try:
        report = json.loads(read_input_text(report_path, "report file"))
    except InputError as exc:
        raise ExportInputError(str(exc)) from None
    except ValueError as exc:
        raise ExportInputError(f"{report_path}: not a JSON report ({exc})") from None
    # A report of a version this veritrail does not know may mean anything by its fields:
    # refused, as every other reader of reports refuses it (report.read_report).
    problem = report_header_problem(report)
    if problem is not None:
        raise ExportInputError(f"{report_path}: {problem}")
    try:
        doc = as_report(report)
    except ReportContractError as exc:
        raise ExportInputError(f"{report_path}: {exc}") from None
    candidates: list[Path] = []
    if dag_path is not None:
        candidates = [Path(dag_path)]
    else:
        if p.is_dir():
            candidates.append(p / "dag.json")
        named = doc.dag.path
        if named:
            candidates += [Path(named), report_path.parent / Path(named).name]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise ExportInputError(
            f"{report_path}: cannot find the DAG the run verified "
            f"(tried {', '.join(str(c) for c in candidates) or 'nothing'}); give it with --dag"
        )
    try:
        dag = load_dag(found)
    except DagValidationError as exc:
        raise ExportInputError(f"{found}: {exc}") from None
    except InputError as exc:
        raise ExportInputError(str(exc)) from None
    return RunForExport(doc, dag, str(p))


def node_spans(dag: Dag) -> dict[str, list[str]]:
    """Node id → its span ids (``meta.original_spans``); `ExportInputError` when the DAG holds
    none (it was not built from a trace)."""
    spans = dag.meta.get("original_spans")
    if not isinstance(spans, dict) or not spans or not dag.meta.get("trace_id"):
        raise ExportInputError(
            "the run's DAG holds no span ids (meta.original_spans and meta.trace_id): only a "
            "DAG built by `veritrail from-trace` (a trace file or --phoenix) can be written back "
            "onto its trace"
        )
    return {str(k): [str(s) for s in v] for k, v in spans.items() if isinstance(v, list)}


def blamed_nodes(claim: ClaimSource, dag: Dag) -> list[str]:
    """The nodes where a Not Fully Supported claim's unsupported content most likely entered:
    the non-root nodes with evidence in the last Fully Supported round, or the final output when
    every round was Not Fully Supported (docs/method.md, "Provenance and error stages")."""
    c = as_claim(claim)
    if not c.unsupported or c.error_stage_status is not ErrorStageStatus.IDENTIFIED:
        return []
    for it in reversed(c.iterations):
        if it.verdict is Verdict.FULLY_SUPPORTED:
            ids = [n for n in it.nodes_with_evidence if n in dag and not dag.is_root(n)]
            return sorted(set(ids), key=lambda n: (dag.stage(n), n))
    return [dag.terminal]


def evidence_trail(claim: ClaimSource) -> list[str]:
    """One line per round: the verdict and the evidence it rested on."""
    lines = []
    for it in as_claim(claim).iterations:
        ev = it.evidence
        shown = "; ".join(
            f'{e.node_id} #{e.sentence_index}: "{shorten(e.text, 100)}"' for e in ev[:5]
        )
        more = f" (+{len(ev) - 5} more)" if len(ev) > 5 else ""
        checked = ", ".join(it.nodes_checked)
        lines.append(
            f"round {it.index}: {it.verdict} over {checked or 'no node'}"
            + (f"; evidence {shown}{more}" if ev else "; no evidence found")
        )
    return lines


def _claim_score(claim: ClaimDoc) -> float | None:
    if claim.score is not None:
        return float(claim.score)
    return VERDICT_SCORES.get(str(claim.verdict))


def citation_explanation(claim: ClaimDoc) -> str:
    """What a claim cites against where its evidence is, for a citation mark."""
    ct = claim.citation
    assert ct is not None
    cited = ", ".join(ct.cited_nodes) or "no source"
    held = ", ".join(ct.supporting_nodes) or "no source"
    lines = [
        f"{ct.kind.value if ct.kind else 'no status'}: markers {' '.join(ct.markers) or 'none'}",
        f"cited: {cited}",
        f"evidence in: {held}",
    ]
    if ct.unresolved:
        lines.append("names no source: " + ", ".join(ct.unresolved))
    return "\n".join(lines)


def _citation_mark(claim: ClaimDoc, trace_id: str, span: str, common: Mapping[str, Any]) -> Mark:
    ct = claim.citation
    assert ct is not None and ct.kind is not None
    return Mark(
        name=CITATION_NAME,
        trace_id=trace_id,
        span_id=span,
        identifier=f"veritrail:{claim.id}",
        label=ct.kind.value,
        score=CITATION_SCORES.get(ct.kind.value),
        explanation=redact(citation_explanation(claim)),
        metadata=redact_obj(
            {
                **common,
                "claim_id": claim.id,
                "claim": claim.text,
                "markers": list(ct.markers),
                "cited_nodes": list(ct.cited_nodes),
                "supporting_nodes": list(ct.supporting_nodes),
            }
        ),
    )


def marks_for_run(report: ReportSource, dag: Dag) -> list[Mark]:
    """Every mark of a run, claims in report order (verdicts first, then origins, then
    citations)."""
    doc = as_report(report)
    spans = node_spans(dag)
    trace_id = str(dag.meta["trace_id"])
    final_spans = spans.get(dag.terminal) or []
    if not final_spans:
        raise ExportInputError(f"the DAG names no span for its final output {dag.terminal!r}")
    final_span = final_spans[0]
    # A run block may carry the run's fingerprint (an extra field of the format's open `run`).
    common = {"veritrail_run": getattr(doc.run, "fingerprint", None) or doc.run.run_dir}
    verdicts: list[Mark] = []
    origins: list[Mark] = []
    citations: list[Mark] = []
    for claim in doc.claims:
        if claim.citation is not None and claim.citation.kind is not None:
            citations.append(_citation_mark(claim, trace_id, final_span, common))
        cid = claim.id
        text = claim.text
        verdict = claim.verdict
        label = str(verdict) if verdict else ERROR_LABEL
        why = claim.reasoning or claim.error or ""
        verdicts.append(
            Mark(
                name=VERDICT_NAME,
                trace_id=trace_id,
                span_id=final_span,
                identifier=f"veritrail:{cid}",
                label=label,
                score=_claim_score(claim) if verdict else None,
                explanation=redact(str(why)),
                metadata=redact_obj(
                    {
                        **common,
                        "claim_id": cid,
                        "claim": text,
                        "termination": claim.termination.value,
                        "error_stages": list(claim.error_stages),
                    }
                ),
            )
        )
        trail = evidence_trail(claim)
        for node in blamed_nodes(claim, dag):
            for span in dict.fromkeys(spans.get(node) or []):
                explanation = (
                    f'Claim {cid} ("{shorten(text, 160)}") is Not Fully Supported: its unsupported '
                    f"content most likely entered at node {node} (stage {dag.stage(node)}), "
                    "written by this span.\nEvidence trail:\n"
                    + "\n".join(f"- {t}" for t in trail)
                    + (f"\nVerdict reasoning: {why}" if why else "")
                )
                origins.append(
                    Mark(
                        name=ORIGIN_NAME,
                        trace_id=trace_id,
                        span_id=span,
                        identifier=f"veritrail:{cid}",
                        label=ORIGIN_LABEL,
                        score=0.0,
                        explanation=redact(explanation),
                        metadata=redact_obj(
                            {
                                **common,
                                "claim_id": cid,
                                "claim": text,
                                "node_id": node,
                                "stage": dag.stage(node),
                                "evidence": [
                                    {
                                        "round": it.index,
                                        "node_id": e.node_id,
                                        "sentence_index": e.sentence_index,
                                        "text": e.text,
                                    }
                                    for it in claim.iterations
                                    for e in it.evidence
                                ],
                            }
                        ),
                    )
                )
    return verdicts + origins + citations


def summary_line(marks: Sequence[Mark]) -> str:
    """``N verdicts, M unsupported-content marks`` (``, K citation marks`` when there are)."""
    v = sum(1 for m in marks if m.name == VERDICT_NAME)
    c = sum(1 for m in marks if m.name == CITATION_NAME)
    line = f"{v} verdict(s), {len(marks) - v - c} unsupported-content mark(s)"
    return line + (f", {c} citation mark(s)" if c else "")


__all__ = [
    "CITATION_NAME",
    "CITATION_SCORES",
    "ERROR_LABEL",
    "ORIGIN_LABEL",
    "ORIGIN_NAME",
    "VERDICT_NAME",
    "VERDICT_SCORES",
    "ExportInputError",
    "Mark",
    "RunForExport",
    "blamed_nodes",
    "citation_explanation",
    "evidence_trail",
    "load_run",
    "marks_for_run",
    "node_spans",
    "summary_line",
]
