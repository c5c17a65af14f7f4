"""What a CI output says about each claim: a report (format version 1 to 5) or a diff document
(`veritrail-diff`) turned into `Finding`s, the one model `junit`, `sarif` and `github` render.

The outcome of a claim follows the gate (`veritrail.outcome`): the model's verdict, not a
review's, so a CI output never disagrees with the exit status. Not Fully Supported is a
failure; a claim that ended in error is an error; Inconclusive is neither (the gate does not
count it): JUnit shows it as skipped, SARIF as a note, GitHub as a notice.

A run with `--citations` adds one `MISCITED` finding per claim whose citation status is
`misattributed` or `cited_not_supporting` (docs/citations.md), beside the claim's own: it
fails (JUnit failure, SARIF error, GitHub error) only when the report's `--max-miscited` gate
failed, as the exit status does; otherwise it is a warning.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..citations import miscited_gate
from ..display import shorten
from ..records import Verdict
from ..redaction import redact_obj
from ..report import (
    ReportSource,
    as_report,
    blamed_nodes,
    dag_roots,
    report_document,
    report_model_kind,
)
from ..report_model import ClaimDoc, ReportDoc

TOOL_NAME = "veritrail"


class Kind(enum.Enum):
    """A claim's outcome in CI terms."""

    PASSED = "passed"
    UNSUPPORTED = "unsupported"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"
    MISCITED = "miscited"
    """The claim cites a source that does not hold its evidence (a second finding of a claim)."""


RULES: dict[Kind, tuple[str, str]] = {
    Kind.UNSUPPORTED: ("not-fully-supported", "A claim is Not Fully Supported by its sources"),
    Kind.INCONCLUSIVE: ("inconclusive", "A claim's verdict is Inconclusive"),
    Kind.ERROR: ("claim-error", "A claim could not be verified (it ended in error)"),
    Kind.MISCITED: ("miscited", "A claim cites a source that does not hold its evidence"),
}
"""Rule id and short description per reported kind (SARIF `ruleId`, the annotations' titles)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One claim as a CI output shows it (strings already redacted)."""

    claim_id: str
    text: str
    kind: Kind
    verdict: str | None
    reasoning: str
    stages: tuple[int, ...]
    """Error stages: where the unsupported content entered the DAG."""
    nodes: tuple[str, ...]
    """The nodes it is blamed on (the report viewer's red ring)."""
    trail: str
    """The evidence trail as plain text, one line per fact."""
    error: str | None = None
    seconds: float | None = None
    citation: str | None = None
    """MISCITED findings: the citation status (`misattributed`, `cited_not_supporting`)."""
    cited_nodes: tuple[str, ...] = ()
    """MISCITED findings: the nodes the claim's markers name."""
    supporting_nodes: tuple[str, ...] = ()
    """MISCITED findings: the root nodes that hold its evidence."""
    gate_failed: bool = False
    """MISCITED findings: the report's `--max-miscited` gate failed (the finding fails)."""

    @property
    def failing(self) -> bool:
        """What fails the CI step: Not Fully Supported, or miscited under a failed gate."""
        return self.kind is Kind.UNSUPPORTED or (self.kind is Kind.MISCITED and self.gate_failed)

    @property
    def cites(self) -> str:
        """ "misattributed: cites museum.txt#1; evidence in collection.txt#1" (MISCITED)."""
        cited = ", ".join(self.cited_nodes) or "no source"
        held = ", ".join(self.supporting_nodes) or "no source"
        return f"{self.citation}: cites {cited}; evidence in {held}"

    @property
    def where(self) -> str:
        """ "stage 2, node summary-2" (or "no identifiable stage")."""
        if not self.stages:
            return "no identifiable stage"
        stages = ", ".join(str(s) for s in self.stages)
        head = f"stage{'s' if len(self.stages) > 1 else ''} {stages}"
        if self.nodes:
            head += f", node{'s' if len(self.nodes) > 1 else ''} {', '.join(self.nodes)}"
        return head

    @property
    def short_text(self) -> str:
        """The claim text cut to 100 characters."""
        return shorten(self.text, 100)


@dataclass(frozen=True, slots=True)
class GateInput:
    """One report to render: a job of a batch, or the single report of verify/check."""

    name: str
    """The test suite's name: the job id, else the DAG path."""
    findings: tuple[Finding, ...]
    dag_uri: str | None = None
    """Where the DAG file is (relative to the working directory when it is inside it)."""
    dag_text: str | None = None
    """The DAG file's text, to find the line of a node (annotations on the node)."""
    properties: tuple[tuple[str, str], ...] = ()
    model_label: str | None = None
    """What a verdict of a model that is not a judge is labelled ("demonstration, not a
    judge": report.model_label), shown beside every finding; None for a judge."""

    @property
    def reported(self) -> tuple[Finding, ...]:
        """The findings that are not passed claims."""
        return tuple(f for f in self.findings if f.kind is not Kind.PASSED)

    def node_line(self, node_id: str | None) -> int:
        """The 1-based line of `"id": "<node_id>"` in the DAG text, else 1."""
        if not node_id or not self.dag_text:
            return 1
        m = re.search(r'"id"\s*:\s*' + re.escape(_json_string(node_id)), self.dag_text)
        return self.dag_text.count("\n", 0, m.start()) + 1 if m else 1


def _json_string(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def _kind(claim: ClaimDoc) -> Kind:
    if claim.errored:
        return Kind.ERROR
    if claim.verdict is Verdict.NOT_FULLY_SUPPORTED:
        return Kind.UNSUPPORTED
    if claim.verdict is Verdict.INCONCLUSIVE:
        return Kind.INCONCLUSIVE
    return Kind.PASSED


def trail_lines(claim: ClaimDoc) -> Iterator[str]:
    """The claim's evidence trail, round by round, as plain lines."""
    for sub in claim.subclaims:
        yield f"sub-claim: {sub}"
    for it in claim.iterations:
        checked = ", ".join(it.nodes_checked)
        yield f"round {it.index}: checked {checked or '(none)'}"
        for e in it.evidence:
            yield f"  evidence {e.node_id}#{e.sentence_index}: {e.text}"
        for s in it.summaries:
            yield f"  summary of {', '.join(s.node_ids)}: {s.text}"
        yield f"  verdict {it.verdict}: {it.reasoning or ''}".rstrip()
    for path in claim.provenance:
        yield "provenance: " + " -> ".join(path)
    review = claim.review
    if review is not None:
        where = ""
        if review.error_stage is not None:
            nodes = ", ".join(review.nodes)
            where = f", error stage {review.error_stage}" + (f", node {nodes}" if nodes else "")
        yield f"reviewed: {review.verdict}{where} ({review.reason or 'no reason'})"


def _redacted(report: ReportSource) -> ReportDoc:
    """The report typed, every string of it redacted (validated once: a typed report is
    re-read from its redacted document)."""
    if isinstance(report, ReportDoc):
        report = report_document(report)
    return as_report(redact_obj(report))


def report_findings(report: ReportSource) -> tuple[Finding, ...]:
    """Every claim of a report as a `Finding`, in report order (the report is redacted first)."""
    return _findings(_redacted(report))


def _miscited(c: ClaimDoc, base: Finding, gate_failed: bool) -> Finding | None:
    """The claim's second finding when its citation points away from its evidence."""
    ct = c.citation
    if ct is None or ct.kind is None or not ct.kind.miscited:
        return None
    lines = [f"markers: {' '.join(ct.markers) or '(none)'}"]
    lines += [f"names no source: {ref}" for ref in ct.unresolved]
    return Finding(
        claim_id=c.id,
        text=c.text,
        kind=Kind.MISCITED,
        verdict=base.verdict,
        reasoning=base.reasoning,
        stages=(),
        nodes=tuple(ct.cited_nodes),
        trail="\n".join([*lines, base.trail] if base.trail else lines),
        citation=ct.kind.value,
        cited_nodes=tuple(ct.cited_nodes),
        supporting_nodes=tuple(ct.supporting_nodes),
        gate_failed=gate_failed,
    )


def _findings(doc: ReportDoc) -> tuple[Finding, ...]:
    terminal = doc.dag.terminal
    roots = dag_roots(doc.dag)
    gate_failed = miscited_gate(doc) is not None
    out = []
    for c in doc.claims:
        kind = _kind(c)
        seconds = c.cost.wall_seconds
        out.append(
            Finding(
                claim_id=c.id,
                text=c.text,
                kind=kind,
                verdict=c.verdict.value if c.verdict is not None else None,
                reasoning=c.reasoning or "",
                stages=tuple(c.error_stages),
                nodes=blamed_nodes(c, roots, terminal) if kind is Kind.UNSUPPORTED else (),
                trail="\n".join(trail_lines(c)),
                error=c.error or None,
                seconds=float(seconds) if seconds is not None else None,
            )
        )
        second = _miscited(c, out[-1], gate_failed)
        if second is not None:
            out.append(second)
    return tuple(out)


def report_input(
    report: ReportSource,
    *,
    name: str | None = None,
    dag_uri: str | None = None,
    dag_text: str | None = None,
) -> GateInput:
    """A report as one `GateInput` (its suite named `name`, else by its DAG path)."""
    doc = _redacted(report)
    dag_path = doc.dag.path or ""
    kind, label = report_model_kind(doc)
    # An oracle run is a test fixture, not a verdict anyone mistakes for a judge's.
    label = label if kind in ("demonstration", "embedded") else None
    props = [("model", doc.model), ("model_label", label or ""), ("dag", dag_path)]
    return GateInput(
        model_label=label,
        name=name or dag_path or "veritrail",
        findings=_findings(doc),
        dag_uri=dag_uri if dag_uri is not None else (dag_path or None),
        dag_text=dag_text,
        properties=tuple((k, v) for k, v in props if v),
    )


def _kind_of(claim: Mapping[str, Any]) -> str:
    """A diff claim's citation status ("no such claim" when absent)."""
    if not claim:
        return "(no such claim)"
    ct = claim.get("citation")
    return str(ct.get("kind")) if ct else "(not checked)"


def diff_input(doc: Mapping[str, Any], *, location: str | None = None) -> GateInput:
    """A diff document as one `GateInput`: one finding per changed claim, the claims that
    became unsupported in B as failures, and a `MISCITED` warning per claim that became
    miscited (version 3), located at `location` (B's report file; by default B's path as the
    diff names it, which may be a run directory: a diff names no DAG file)."""
    doc = redact_obj(doc)
    b_side = doc.get("b") or {}
    findings = []
    for ch in doc.get("changes", []):
        a, b = ch.get("a") or {}, ch.get("b") or {}
        claim = b or a
        lines = [
            f"A: {a.get('verdict') if a else '(no such claim)'}",
            f"B: {b.get('verdict') if b else '(no such claim)'}",
        ]
        lines += [f"evidence added: {e}" for e in ch.get("evidence_added") or []]
        lines += [f"evidence removed: {e}" for e in ch.get("evidence_removed") or []]
        findings.append(
            Finding(
                claim_id=str(claim.get("id")),
                text=str(claim.get("text", "")),
                kind=Kind.UNSUPPORTED if ch.get("newly_unsupported") else Kind.PASSED,
                verdict=b.get("verdict") if b else None,
                reasoning=f"{ch.get('status')}: A {a.get('verdict')} -> B {b.get('verdict')}"
                if a and b
                else str(ch.get("status")),
                stages=tuple(int(s) for s in claim.get("error_stages") or []),
                nodes=tuple(str(n) for n in claim.get("entered_at") or []),
                trail="\n".join(lines),
            )
        )
        ct = b.get("citation") if b else None
        if ch.get("newly_miscited") and ct:
            cited = tuple(str(n) for n in ct.get("cited_nodes") or [])
            findings.append(
                Finding(
                    claim_id=str(claim.get("id")),
                    text=str(claim.get("text", "")),
                    kind=Kind.MISCITED,
                    verdict=b.get("verdict"),
                    reasoning=f"newly miscited: A {_kind_of(a)} -> B {ct.get('kind')}",
                    stages=(),
                    nodes=cited,
                    trail="\n".join(lines),
                    citation=str(ct.get("kind")),
                    cited_nodes=cited,
                    supporting_nodes=tuple(str(n) for n in ct.get("supporting_nodes") or []),
                )
            )
    path = str(b_side.get("path") or "") or None
    return GateInput(
        name=f"diff {doc.get('a', {}).get('path', 'A')} -> {path or 'B'}",
        findings=tuple(findings),
        dag_uri=location or path,
        properties=(("a", str(doc.get("a", {}).get("path", ""))), ("b", path or "")),
    )


def counts(inputs: Sequence[GateInput]) -> dict[Kind, int]:
    """Findings per kind over all inputs."""
    out = dict.fromkeys(Kind, 0)
    for gi in inputs:
        for f in gi.findings:
            out[f.kind] += 1
    return out


def incomplete_input(name: str, run_dir: str) -> GateInput:
    """A batch job that wrote no report (claims without a result): one errored test case, so
    the CI output does not pass over it."""
    finding = Finding(
        claim_id=name,
        text=f"job {name} did not finish",
        kind=Kind.ERROR,
        verdict=None,
        reasoning="",
        stages=(),
        nodes=(),
        trail="",
        error=f"job {name} has claims without a result; run the batch again ({run_dir})",
    )
    return GateInput(name=name, findings=(finding,))
