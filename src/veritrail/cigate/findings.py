"""What a CI output says about each claim: a report (format version 1 or 2) or a diff document
(`veritrail-diff`) turned into `Finding`s, the one model `junit`, `sarif` and `github` render.

The outcome of a claim follows the gate (`veritrail.outcome`): the model's verdict, not a
review's, so a CI output never disagrees with the exit status. Not Fully Supported is a
failure; a claim that ended in error is an error; Inconclusive is neither (the gate does not
count it): JUnit shows it as skipped, SARIF as a note, GitHub as a notice.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..display import shorten
from ..records import Verdict
from ..redaction import redact_obj
from ..report import blamed_nodes, report_model_kind

TOOL_NAME = "veritrail"


class Kind(enum.Enum):
    """A claim's outcome in CI terms."""

    PASSED = "passed"
    UNSUPPORTED = "unsupported"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"


RULES: dict[Kind, tuple[str, str]] = {
    Kind.UNSUPPORTED: ("not-fully-supported", "A claim is Not Fully Supported by its sources"),
    Kind.INCONCLUSIVE: ("inconclusive", "A claim's verdict is Inconclusive"),
    Kind.ERROR: ("claim-error", "A claim could not be verified (it ended in error)"),
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


def _kind(claim: Mapping[str, Any]) -> Kind:
    verdict = claim.get("verdict")
    if claim.get("termination") == "error" or verdict is None:
        return Kind.ERROR
    if verdict == Verdict.NOT_FULLY_SUPPORTED.value:
        return Kind.UNSUPPORTED
    if verdict == Verdict.INCONCLUSIVE.value:
        return Kind.INCONCLUSIVE
    return Kind.PASSED


def trail_lines(claim: Mapping[str, Any]) -> Iterator[str]:
    """The claim's evidence trail, round by round, as plain lines."""
    for sub in claim.get("subclaims") or []:
        yield f"sub-claim: {sub}"
    for it in claim.get("iterations") or []:
        checked = ", ".join(str(n) for n in it.get("nodes_checked", []))
        yield f"round {it.get('index')}: checked {checked or '(none)'}"
        for e in it.get("evidence") or []:
            yield f"  evidence {e.get('node_id')}#{e.get('sentence_index')}: {e.get('text')}"
        for s in it.get("summaries") or []:
            yield f"  summary of {', '.join(s.get('node_ids', []))}: {s.get('text')}"
        yield f"  verdict {it.get('verdict')}: {it.get('reasoning') or ''}".rstrip()
    for path in claim.get("provenance") or []:
        yield "provenance: " + " -> ".join(str(n) for n in path)
    review = claim.get("review")
    if isinstance(review, Mapping) and review.get("verdict"):
        where = ""
        if review.get("error_stage") is not None:
            nodes = ", ".join(str(n) for n in review.get("nodes") or [])
            where = f", error stage {review.get('error_stage')}" + (
                f", node {nodes}" if nodes else ""
            )
        yield f"reviewed: {review.get('verdict')}{where} ({review.get('reason') or 'no reason'})"


def report_findings(report: Mapping[str, Any]) -> tuple[Finding, ...]:
    """Every claim of a report as a `Finding`, in report order (the report is redacted first)."""
    report = redact_obj(report)
    dag = report.get("dag") or {}
    terminal = str(dag.get("terminal") or "")
    roots = {str(n.get("id")) for n in dag.get("nodes_touched", []) if n.get("is_root")}
    out = []
    for c in report.get("claims", []):
        kind = _kind(c)
        seconds = (c.get("cost") or {}).get("wall_seconds")
        error = c.get("error")
        out.append(
            Finding(
                claim_id=str(c.get("id")),
                text=str(c.get("text", "")),
                kind=kind,
                verdict=c.get("verdict"),
                reasoning=str(c.get("reasoning") or ""),
                stages=tuple(int(s) for s in c.get("error_stages") or []),
                nodes=blamed_nodes(c, roots, terminal) if kind is Kind.UNSUPPORTED else (),
                trail="\n".join(trail_lines(c)),
                error=str(error) if error else None,
                seconds=float(seconds) if isinstance(seconds, int | float) else None,
            )
        )
    return tuple(out)


def report_input(
    report: Mapping[str, Any],
    *,
    name: str | None = None,
    dag_uri: str | None = None,
    dag_text: str | None = None,
) -> GateInput:
    """A report as one `GateInput` (its suite named `name`, else by its DAG path)."""
    dag_path = str((report.get("dag") or {}).get("path") or "")
    model = report.get("model")
    model_name = model.get("name", "") if isinstance(model, Mapping) else model
    kind, label = report_model_kind(report)
    # An oracle run is a test fixture, not a verdict anyone mistakes for a judge's.
    label = label if kind in ("demonstration", "embedded") else None
    props = [("model", str(model_name or "")), ("model_label", label or ""), ("dag", dag_path)]
    return GateInput(
        model_label=label,
        name=name or dag_path or "veritrail",
        findings=report_findings(report),
        dag_uri=dag_uri if dag_uri is not None else (dag_path or None),
        dag_text=dag_text,
        properties=tuple((k, str(redact_obj(v))) for k, v in props if v),
    )


def diff_input(doc: Mapping[str, Any], *, location: str | None = None) -> GateInput:
    """A diff document as one `GateInput`: one finding per changed claim, the claims that
    became unsupported in B as failures, located at `location` (B's report file; by default
    B's path as the diff names it, which may be a run directory: a diff names no DAG file)."""
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
