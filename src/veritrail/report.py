"""The versioned JSON report (`"format": "veritrail-report"`), schema in `schemas/report.schema.json`.

`claim_to_dict` / `claim_from_dict` are exact inverses, so a run store can keep finished claims as
report fragments and a resumed run rebuilds the same report. A report claim's ``offsets`` (and
``citation``) are not part of that fragment: `build_report` computes them from the DAG's texts.

The read side: every reader of reports takes the typed model of `report_model` through
`as_report` (or `as_claim`, `load_report_doc`), validated once there, an older version migrated
in one place (`migrate`), and reads attributes, never a report dict by key
(tests/test_report_readers.py scans every module of the package for such a read). The document
is a dict only while it is built and written (`build_report`, `attach_citations`, the run
store's fragments). Fields that vary between otherwise
identical runs (timestamps, wall times) live under `"run"` and in `cost.wall_seconds`;
`comparable(report)` drops them for equality checks.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from .dag import Dag
from .errors import InputProblem
from .lm.demo import DEMO_LABEL, is_demonstration
from .method.claims import claim_from_json, claim_to_json
from .records import (
    Claim,
    ClaimResult,
    Cost,
    ErrorStageStatus,
    Iteration,
    SelectionIssue,
    SentenceRef,
    StepCost,
    Summary,
    Termination,
    Verdict,
)
from .report_model import NO_VERDICT, ModelKind, parse_report
from .report_model import ClaimDoc as ClaimDoc  # the typed contract, re-exported for readers
from .report_model import DagDoc as DagDoc
from .report_model import ReportContractError as ReportContractError
from .report_model import ReportDoc as ReportDoc
from .report_model import ReviewDoc as ReviewDoc
from .report_model import RunDoc as RunDoc
from .report_model import parse_claim as parse_claim
from .textio import atomic_write_text as atomic_write_text  # written here first; kept importable

ReportSource = ReportDoc | Mapping[str, Any]
"""What a reader of reports accepts: the typed model, or a report document (a dict as
`build_report` and `read_report` give it, or a `Report`), validated once by `as_report`."""

ClaimSource = ClaimDoc | Mapping[str, Any]
"""One claim of a report: typed, or as the report (or a run store's results.jsonl) holds it."""

REPORT_FORMAT = "veritrail-report"
REPORT_VERSION = 5
"""The version this code writes. 2 added a claim's optional ``review`` object (a person's
verdict beside the model's: `veritrail.runs.reviews`); 3 added the top-level ``model_kind`` and
``model_label`` (whether a judge, the embedded model or a demonstration made the verdicts); 4 a
claim's optional ``citation`` and ``summary.citations`` (`veritrail.citations`), and
its ``offsets`` with ``dag.terminal_spans`` (`veritrail.offsets`); 5 the citation's
``followed_nodes`` (the sources reached through cited intermediate nodes). An
older report reads as a newer one without those fields (docs/report.md, "Versions");
`report_model_kind` derives the kind from the model's name for it."""

READABLE_VERSIONS = (1, 2, 3, 4, 5)
"""The versions `read_report` accepts."""


MODEL_LABELS = {
    "demonstration": DEMO_LABEL,
    "embedded": "embedded small model, for trying the tool, not a judge",
    "oracle": "verdicts read from an oracle file, no model",
    "judge": None,
}
"""`model_kind` -> the words shown beside every verdict it made (none for a judge)."""


def model_kind(model: str | None) -> str:
    """What made a report's verdicts: ``"demonstration"`` (`demo/...`, or a model named
    ``.../demo...`` such as the loopback word-overlap server served as ``openai/demo-overlap``),
    ``"embedded"`` (`local/...`, the small bundled model), ``"oracle"`` (verdicts from a file)
    or ``"judge"`` (any other model). Decided by name alone, so an old report gets the same
    answer as a new one."""
    name = str(model or "")
    if is_demonstration(name) or name.split("/", 1)[-1].startswith("demo"):
        return "demonstration"
    if name.startswith("local/"):
        return "embedded"
    if name == "oracle":
        return "oracle"
    return "judge"


def report_model_kind(report: ReportSource) -> tuple[str, str | None]:
    """(kind, label) of a report: its own fields (version 3), else derived from its model."""
    doc = as_report(report)
    kind = doc.model_kind.value if doc.model_kind is not None else model_kind(doc.model)
    return kind, doc.model_label


class ReportFormatError(InputProblem, ValueError):
    """The file is not a VeriTrail report of a version this code reads."""


def _step_cost(d: Mapping[str, Any]) -> StepCost:
    return StepCost(
        lm_calls=int(d.get("lm_calls", 0)),
        cached_calls=int(d.get("cached_calls", 0)),
        input_tokens=int(d.get("input_tokens", 0)),
        output_tokens=int(d.get("output_tokens", 0)),
        dollars=float(d.get("dollars", 0.0)),
    )


_STEP_COST_FIELDS = tuple(f.name for f in fields(StepCost) if f.name != "cached_input_tokens")
"""A step's cost in the report, in field order (`dataclasses.asdict` per step was half the
time of building a report: it deep-copies)."""


def claim_to_dict(r: ClaimResult) -> dict[str, Any]:
    """One claim of the report."""
    return {
        **claim_to_json(r.claim),  # id, text, sentence_indices
        "subclaims": list(r.subclaims),
        "verdict": r.verdict.value if r.verdict is not None else None,
        "reasoning": r.reasoning,
        "termination": r.termination.value,
        "error": r.error,
        "score": r.score,
        "iterations": [
            {
                "index": it.index,
                "nodes_checked": list(it.nodes_checked),
                "carried_roots": list(it.carried_roots),
                "nodes_with_evidence": list(it.nodes_with_evidence),
                "evidence": [
                    {"node_id": e.node_id, "sentence_index": e.sentence_index, "text": e.text}
                    for e in it.evidence
                ],
                "summaries": [{"node_ids": list(s.node_ids), "text": s.text} for s in it.summaries],
                "dropped_ids": list(it.dropped_ids),
                "verdict": it.verdict.value,
                "reasoning": it.reasoning,
                "verdict_called_lm": it.verdict_called_lm,
                "compression_reruns": it.compression_reruns,
                "evidence_truncated": it.evidence_truncated,
            }
            for it in r.iterations
        ],
        "provenance": [list(p) for p in r.provenance],
        "error_stages": list(r.error_stages),
        "error_stage_status": r.error_stage_status.value,
        "issues": [i.to_json() for i in r.issues],
        "cost": {
            "lm_calls": r.cost.lm_calls,
            "cached_calls": r.cost.cached_calls,
            "input_tokens": r.cost.input_tokens,
            "output_tokens": r.cost.output_tokens,
            "dollars": round(r.cost.dollars, 6),
            "nodes_read": r.cost.nodes_read,
            "nodes_read_share": r.cost.nodes_read_share,
            "wall_seconds": round(r.cost.wall_seconds, 3),
            # cached_input_tokens stays out of the report: it varies between identical runs.
            "per_step": {
                k: {f: getattr(v, f) for f in _STEP_COST_FIELDS}
                for k, v in sorted(r.cost.per_step.items())
            },
        },
    }


def claim_from_dict(d: Mapping[str, Any]) -> ClaimResult:
    """Inverse of `claim_to_dict`."""
    c = d["cost"]
    return ClaimResult(
        claim=claim_from_json(d),
        subclaims=tuple(d["subclaims"]),
        verdict=Verdict(d["verdict"]) if d["verdict"] is not None else None,
        reasoning=d["reasoning"],
        termination=Termination(d["termination"]),
        iterations=tuple(
            Iteration(
                index=it["index"],
                nodes_checked=tuple(it["nodes_checked"]),
                carried_roots=tuple(it["carried_roots"]),
                nodes_with_evidence=tuple(it["nodes_with_evidence"]),
                evidence=tuple(
                    SentenceRef(e["node_id"], e["sentence_index"], e["text"])
                    for e in it["evidence"]
                ),
                summaries=tuple(Summary(tuple(s["node_ids"]), s["text"]) for s in it["summaries"]),
                dropped_ids=tuple(it["dropped_ids"]),
                verdict=Verdict(it["verdict"]),
                reasoning=it["reasoning"],
                verdict_called_lm=it["verdict_called_lm"],
                compression_reruns=it.get("compression_reruns", 0),
                evidence_truncated=it.get("evidence_truncated", False),
            )
            for it in d["iterations"]
        ),
        provenance=tuple(tuple(p) for p in d["provenance"]),
        error_stages=tuple(d["error_stages"]),
        error_stage_status=ErrorStageStatus(d["error_stage_status"]),
        cost=Cost(
            lm_calls=c["lm_calls"],
            cached_calls=c.get("cached_calls", 0),
            input_tokens=c["input_tokens"],
            output_tokens=c["output_tokens"],
            dollars=c.get("dollars", 0.0),
            nodes_read=c["nodes_read"],
            nodes_read_share=c["nodes_read_share"],
            wall_seconds=c.get("wall_seconds", 0.0),
            per_step={k: _step_cost(v) for k, v in c.get("per_step", {}).items()},
        ),
        error=d.get("error"),
        issues=tuple(SelectionIssue.from_json(i) for i in d.get("issues", ())),
        score=d.get("score"),
    )


def claim_from_doc(c: ClaimDoc) -> ClaimResult:
    """A typed report claim as the engine's record (what `claim_from_dict` gives for its
    document)."""
    cost = c.cost
    return ClaimResult(
        claim=Claim(c.id, c.text, tuple(c.sentence_indices)),
        subclaims=tuple(c.subclaims),
        verdict=c.verdict,
        reasoning=c.reasoning,
        termination=c.termination,
        iterations=tuple(
            Iteration(
                index=it.index,
                nodes_checked=tuple(it.nodes_checked),
                carried_roots=tuple(it.carried_roots),
                nodes_with_evidence=tuple(it.nodes_with_evidence),
                evidence=tuple(
                    SentenceRef(e.node_id, e.sentence_index, e.text) for e in it.evidence
                ),
                summaries=tuple(Summary(tuple(s.node_ids), s.text) for s in it.summaries),
                dropped_ids=tuple(it.dropped_ids),
                verdict=it.verdict,
                reasoning=it.reasoning,
                verdict_called_lm=it.verdict_called_lm,
                compression_reruns=it.compression_reruns,
                evidence_truncated=it.evidence_truncated,
            )
            for it in c.iterations
        ),
        provenance=tuple(tuple(p) for p in c.provenance),
        error_stages=tuple(c.error_stages),
        error_stage_status=c.error_stage_status,
        cost=Cost(
            lm_calls=cost.lm_calls,
            cached_calls=cost.cached_calls,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens,
            dollars=cost.dollars if cost.dollars is not None else 0.0,
            nodes_read=cost.nodes_read,
            nodes_read_share=cost.nodes_read_share,
            wall_seconds=cost.wall_seconds if cost.wall_seconds is not None else 0.0,
            per_step={
                k: StepCost(
                    lm_calls=v.lm_calls,
                    cached_calls=v.cached_calls,
                    input_tokens=v.input_tokens,
                    output_tokens=v.output_tokens,
                    dollars=v.dollars,
                )
                for k, v in cost.per_step.items()
            },
        ),
        error=c.error,
        issues=tuple(SelectionIssue(i.kind, i.detail) for i in c.issues),
        score=c.score,
    )


def _touched_nodes(dag: Dag, results: Sequence[ClaimResult]) -> list[dict[str, Any]]:
    """The nodes any claim read, plus the terminal, with edges among them (for the DAG drawing)."""
    ids: set[str] = {dag.terminal}
    for r in results:
        for it in r.iterations:
            ids.update(it.nodes_checked)
            ids.update(it.carried_roots)
    out = []
    for nid in sorted(ids, key=lambda n: (-dag.stage(n), n)):
        node = dag.node(nid)
        out.append(
            {
                "id": nid,
                "stage": node.stage,
                "is_root": not node.sources,
                "sources": [s for s in node.sources if s in ids],
                "n_sources": len(node.sources),
                "preview": node.text[:300],
            }
        )
    return out


def summarize(results: Sequence[ClaimResult]) -> dict[str, Any]:
    """Run totals: verdict counts, error-stage counts, cost."""
    verdicts = Counter(r.verdict.value if r.verdict else NO_VERDICT for r in results)
    stages = Counter(s for r in results for s in r.error_stages)
    return {
        "claims": len(results),
        "verdicts": {
            **{v.value: verdicts.get(v.value, 0) for v in Verdict},
            NO_VERDICT: verdicts.get(NO_VERDICT, 0),
        },
        "terminations": dict(sorted(Counter(r.termination.value for r in results).items())),
        "error_stages": {str(k): v for k, v in sorted(stages.items())},
        "cost": {
            "lm_calls": sum(r.cost.lm_calls for r in results),
            "cached_calls": sum(r.cost.cached_calls for r in results),
            "input_tokens": sum(r.cost.input_tokens for r in results),
            "output_tokens": sum(r.cost.output_tokens for r in results),
            "dollars": round(sum(r.cost.dollars for r in results), 6),
            "nodes_read_mean": (
                sum(r.cost.nodes_read for r in results) / len(results) if results else 0.0
            ),
        },
    }


def build_report(
    results: Iterable[ClaimResult],
    dag: Dag,
    *,
    model: str,
    config: Mapping[str, Any],
    run: Mapping[str, Any] | None = None,
    dag_path: str | None = None,
    extras: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the full report. Claims keep the order of the input claims."""
    res = list(results)
    stages = Counter(n.stage for n in dag)
    terminal = dag.node(dag.terminal)
    from .method.segment import split_sentences
    from .offsets import OffsetIndex

    offsets = OffsetIndex(dag)

    report: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "model": model,
        # Said in the report itself so that no reader mistakes a demonstration for a verdict.
        "model_kind": model_kind(model),
        "model_label": MODEL_LABELS[model_kind(model)],
        "config": dict(config),
        "dag": {
            "path": dag_path,
            "nodes": len(dag),
            "terminal": dag.terminal,
            "terminal_sentences": split_sentences(terminal.text),
            "terminal_spans": offsets.terminal_spans(),
            "nodes_per_stage": {str(k): v for k, v in sorted(stages.items())},
            "max_stage": max(stages),
            "nodes_touched": _touched_nodes(dag, res),
        },
        "summary": summarize(res),
        # Offsets need the DAG's texts: added here, not by `claim_to_dict`, so a run store's
        # claim fragments stay free of them and a resumed run recomputes them.
        "claims": [{**claim_to_dict(r), "offsets": offsets.claim(r)} for r in res],
        "run": dict(run or {}),
    }
    if extras:
        report.update(extras)
    return report


def with_claim_reviews(
    report: Mapping[str, Any], review_of: Callable[[str], Mapping[str, Any] | None]
) -> dict[str, Any]:
    """A copy of a report document (any readable version) as the current version, each claim
    with the ``review`` object `review_of(claim id)` gives (none: the claim has no review, a
    stale one is dropped). The model's ``verdict`` is never changed. Claims are copied one level
    deep. The one place a report's document is edited after `build_report`; `runs.reviews`
    decides what a review object holds."""
    out = dict(report)
    claims = []
    for c in report.get("claims", []):
        claim = dict(c)
        claim.pop("review", None)
        got = review_of(str(claim.get("id")))
        if got is not None:
            claim["review"] = dict(got)
        claims.append(claim)
    out["claims"] = claims
    out["version"] = REPORT_VERSION
    if "model_kind" not in out:
        # Brought up to this version: say what made the verdicts, as a new report does.
        kind = model_kind(out.get("model"))
        out["model_kind"] = kind
        out["model_label"] = out.get("model_label", MODEL_LABELS[kind])
    return out


def indented_json(doc: Any) -> str:
    """`doc` as the JSON text reports, run files and batch summaries are written in: indented
    by 2 spaces, UTF-8 characters as they are (not \\u escapes), and a final newline.

    Encoded by orjson: the standard library's encoder is pure Python as soon as `indent` is
    given (a 6.3 MB report of 1,500 claims: 0.157 s against orjson's 0.007 s, the largest
    part of writing a report; benchmarks/README.md, "Batch on Ray"). The text is the same as
    ``json.dumps(doc, ensure_ascii=False, indent=2)`` for what reports hold (strings, numbers,
    booleans, null, lists, objects; dictionary keys that are not strings are written as strings
    by both), except two cases: a float the standard library writes with an exponent may be
    written otherwise (``1e-7`` for ``1e-07``, ``0.00001`` for ``1e-05``: the same number; about
    1% of random doubles; a small cost in USD can be one), and NaN or an infinity becomes
    ``null`` (the standard library writes ``NaN``, which is not JSON). `tests/test_report_json.py`
    holds both.
    """
    import orjson

    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n"


def write_report(report: Mapping[str, Any], path: str | Path) -> None:
    """Write a report as indented UTF-8 JSON (`indented_json`), atomically
    (`atomic_write_text`), with every string passed through `redaction.redact_obj` (error texts
    may quote a server that echoed a key)."""
    from .redaction import redact_obj

    atomic_write_text(path, indented_json(redact_obj(report)))


def report_header_problem(doc: object) -> str | None:
    """Why parsed JSON is not a report this code reads (not a VeriTrail report, or a version it
    does not know), or None when it is one (its fields are checked by `as_report`)."""
    if not isinstance(doc, dict) or doc.get("format") != REPORT_FORMAT:
        return f'not a VeriTrail report (no "format": "{REPORT_FORMAT}")'
    if doc.get("version") not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        return f"report version {doc.get('version')!r}, this veritrail reads {readable}"
    return None


def is_readable_report(doc: object) -> bool:
    """`doc` (parsed JSON) says it is a VeriTrail report of a version this code reads."""
    return report_header_problem(doc) is None


def read_report(path: str | Path) -> dict[str, Any]:
    """Read a report, checking its format and version."""
    from .textio import InputError, read_input_json

    try:
        doc = read_input_json(path, "report")  # the input rules of every file (textio)
    except InputError as exc:
        raise ReportFormatError(str(exc)) from None
    problem = report_header_problem(doc)
    if problem is not None:
        raise ReportFormatError(f"{path}: {problem}")
    return doc  # type: ignore[no-any-return]


def migrate(doc: ReportDoc) -> ReportDoc:
    """An older report as the current version reads it, the one place this is decided: a
    version 1 or 2 report has no `model_kind` and `model_label`, derived from its model's name
    (`model_kind`, `MODEL_LABELS`); version 1 has no claim reviews, which the model defaults to
    none. `version` keeps what the file says."""
    if doc.model_kind is not None:
        return doc
    kind = model_kind(doc.model)
    update: dict[str, Any] = {"model_kind": ModelKind(kind)}
    if "model_label" not in doc.model_fields_set:
        update["model_label"] = MODEL_LABELS[kind]
    return doc.model_copy(update=update)


def as_report(report: ReportSource, *, source: str | Path | None = None) -> ReportDoc:
    """The report as its typed model (`report_model.ReportDoc`), for the readers of reports:
    each validates at its boundary with this, once, and reads attributes after. A `ReportDoc`
    is returned as it is; a document is validated (`ReportContractError` naming the first
    wrong field; with `source`, a `ReportFormatError` naming that file too) and migrated to the
    current version (`migrate`)."""
    if isinstance(report, ReportDoc):
        return report
    typed = getattr(report, "doc", None)  # a `results.Report` keeps its validated model
    if isinstance(typed, ReportDoc):
        return typed
    if source is None:
        return migrate(parse_report(report))
    try:
        return migrate(parse_report(report))
    except ReportContractError as exc:
        raise ReportFormatError(f"{source}: {exc}") from None


def as_claim(claim: ClaimSource) -> ClaimDoc:
    """One claim as its typed model (`report_model.ClaimDoc`), validated when it is not."""
    return claim if isinstance(claim, ClaimDoc) else parse_claim(claim)


def as_dag(dag: DagDoc | Mapping[str, Any]) -> DagDoc:
    """A report's `dag` section as its typed model, validated when it is not."""
    if isinstance(dag, DagDoc):
        return dag
    from pydantic import ValidationError

    try:
        return DagDoc.model_validate(dag)
    except ValidationError as exc:
        raise ReportContractError(f"report field dag: {exc.errors()[0]['msg']}") from None


def load_report_doc(path: str | Path) -> ReportDoc:
    """A report file as its typed model, migrated (`migrate`); `ReportFormatError` naming the
    file and why it is not a report this code reads, or its first wrong field.

    Plain JSON text is parsed and validated in one pass by pydantic's JSON parser (a third
    faster than parsing, then validating: `veritrail diff` reads two large reports). Anything
    else (not a report, another version, a broken field, a lone surrogate, a ``NaN`` or
    ``Infinity``, which that parser accepts and JSON does not) is read the strict way,
    `read_report` then `as_report`, whose checks and messages decide."""
    from pydantic import ValidationError

    from .textio import InputError, read_input_text

    try:
        text = read_input_text(path, "report")  # UTF-8, a BOM dropped (textio's rules)
    except InputError as exc:
        raise ReportFormatError(str(exc)) from None
    if "NaN" not in text and "Infinity" not in text:
        try:
            return migrate(ReportDoc.model_validate_json(text))
        except ValidationError:
            pass
    return as_report(read_report(path), source=path)


def report_document(doc: ReportDoc) -> dict[str, Any]:
    """A typed report back as a JSON document (the fields the file had, and the migrated ones;
    no default filled in), e.g. to redact every string of it (`cigate`)."""
    return doc.model_dump(mode="json", exclude_unset=True, by_alias=True)


def comparable(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report without fields that differ between identical runs (timing, run metadata, and
    what the cache saved: cached calls and dollars)."""
    doc = json.loads(json.dumps(report))
    doc.pop("run", None)
    # Cache hits cost nothing: a resumed or repeated run differs in cached calls and dollars only.
    for c in doc.get("claims", []):
        for key in ("wall_seconds", "cached_calls", "dollars"):
            c["cost"].pop(key, None)
        for step in c["cost"].get("per_step", {}).values():
            step.pop("cached_calls", None)
            step.pop("dollars", None)
    for key in ("cached_calls", "dollars"):
        doc.get("summary", {}).get("cost", {}).pop(key, None)
    return doc  # type: ignore[no-any-return]


def blamed_nodes(claim: ClaimSource, roots: set[str], terminal: str) -> tuple[str, ...]:
    """The nodes behind a report claim's identified error stage (the HTML viewer's red dashed
    ring, docs/report.md): the non-root evidence nodes of its last Fully Supported round, or the
    final output when no round was; none when the stage is not identified. `roots` are the DAG's
    root ids and `terminal` its final output's, as the report's `dag` section gives them."""
    c = as_claim(claim)
    if c.error_stage_status is not ErrorStageStatus.IDENTIFIED:
        return ()
    for it in reversed(c.iterations):
        if it.verdict is Verdict.FULLY_SUPPORTED:
            return tuple(str(n) for n in it.nodes_with_evidence if n not in roots)
    return (terminal,) if terminal else ()


def dag_roots(dag: DagDoc) -> set[str]:
    """The root ids among a report's drawn nodes (`dag.nodes_touched`)."""
    return {n.id for n in dag.nodes_touched if n.is_root}
