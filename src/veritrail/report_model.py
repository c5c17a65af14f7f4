"""The report's typed contract: pydantic models of the versioned JSON report, from which
`schemas/report.schema.json` is generated (`python -m veritrail.report_model`; CI fails when the
committed file is stale: tests/test_report_model.py).

Readers of reports (results, the runs index, diff, the CI outputs, the Phoenix marks, the batch
summary) validate a report once with `parse_report` and read typed fields instead of string keys.
The verdict, termination, error-stage and issue names come from the enums of `records`, so they
are defined once. Objects accept fields they do not know (a later minor addition, another
tool's extra such as G2LDetect's `g2l`) except where the format has always forbidden them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import InputProblem
from .records import CitationStatus, ErrorStageStatus, IssueKind, Termination, Verdict

SCHEMA_FILE = Path(__file__).parent / "schemas" / "report.schema.json"
SCHEMA_ID = "https://veritrail.dev/schemas/report-v4.json"

NO_VERDICT = "error"
"""The key of `summary.verdicts` that counts the claims with no verdict (they ended in error)."""

NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


class ModelKind(StrEnum):
    """What made a report's verdicts (version 3's `model_kind`)."""

    JUDGE = "judge"
    EMBEDDED = "embedded"
    DEMONSTRATION = "demonstration"
    ORACLE = "oracle"


class _Open(BaseModel):
    """An object of the report that may carry fields this version does not name."""

    model_config = ConfigDict(extra="allow", frozen=True)


class _Closed(BaseModel):
    """An object of the report whose fields are exactly these."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EvidenceDoc(_Closed):
    node_id: str
    sentence_index: NonNegInt
    text: str


class SummaryItemDoc(_Closed):
    node_ids: list[str]
    text: str


class IterationDoc(_Open):
    index: Annotated[int, Field(ge=1, description="1-based iteration number")]
    nodes_checked: list[str] = Field(
        description="nodes whose sentences evidence selection read in this iteration"
    )
    carried_roots: list[str] = Field(
        description="roots with earlier evidence, not re-read, whose full text went into this "
        "verdict"
    )
    nodes_with_evidence: list[str] = Field(
        description="nodes from which sentences were selected in this iteration"
    )
    evidence: list[EvidenceDoc]
    summaries: list[SummaryItemDoc]
    dropped_ids: list[str] = Field(
        description="ids returned by evidence selection that were not assigned in the prompt"
    )
    verdict: Verdict
    reasoning: str
    verdict_called_lm: bool = Field(
        description="false when the verdict was Not Fully Supported for lack of evidence"
    )
    compression_reruns: NonNegInt = 0
    evidence_truncated: bool = Field(
        default=False,
        description="the verdict saw only the largest subset of evidence that fits",
    )


class IssueDoc(_Open):
    kind: IssueKind
    detail: str


class StepCostDoc(_Open):
    lm_calls: NonNegInt
    cached_calls: NonNegInt
    input_tokens: NonNegInt
    output_tokens: NonNegInt
    dollars: NonNegFloat


class ClaimCostDoc(_Open):
    lm_calls: NonNegInt = Field(description="model calls the method made, cache hits included")
    cached_calls: NonNegInt = Field(
        default=0, description="of those, answered from the cache (no cost)"
    )
    input_tokens: NonNegInt
    output_tokens: NonNegInt
    dollars: NonNegFloat | None = Field(
        default=None, description="price of calls actually made (cache hits cost nothing)"
    )
    nodes_read: NonNegInt
    nodes_read_share: Annotated[float, Field(ge=0, le=1)]
    wall_seconds: NonNegFloat | None = None
    per_step: dict[str, StepCostDoc] = Field(default_factory=dict)


class ReviewDoc(_Open):
    """Version 2: the effective (latest) review of the claim by a person (`veritrail review`);
    the model's verdict stays in the claim's `verdict`. The history is in the run directory's
    reviews.jsonl."""

    verdict: Verdict
    reason: Annotated[str, Field(min_length=1)]
    author: str
    time: str = Field(description="ISO 8601, UTC")
    count: Annotated[int, Field(ge=1, description="how many reviews the claim has had")]
    error_stage: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="the stage where the reviewer says the unsupported content entered "
        "(`veritrail review --stage`), when set",
    )
    nodes: list[str] = Field(
        default_factory=list,
        description="the node(s) of that stage the reviewer blames (`--node`)",
    )


class CitationDoc(_Open):
    """Version 4, with `--citations`: the claim's own citation markers against the sources that
    hold its evidence (`veritrail.citations`, docs/citations.md)."""

    kind: CitationStatus | None = Field(
        description="the claim's citation status; null when the claim has no verdict (it ended "
        "in error)"
    )
    markers: list[str] = Field(description="the markers of the sentences the claim came from")
    cited_nodes: list[str] = Field(description="the nodes those markers name")
    supporting_nodes: list[str] = Field(description="the root nodes holding its evidence")
    located_by: Literal["sentences", "text", "overlap", "none"] = Field(
        default="sentences",
        description="how its sentences were found: its sentence_indices, else its text or its "
        "words in the final output",
    )
    unresolved: list[str] = Field(default_factory=list, description="references that name no node")
    followed_nodes: list[str] = Field(
        default_factory=list,
        description="version 5: the sources the cited nodes lead to, a cited intermediate node "
        "followed down through its own markers (a node without markers stands for its inputs); "
        "read from an older report as `cited_nodes`, which it then equals",
    )

    @model_validator(mode="before")
    @classmethod
    def _followed_defaults_to_cited(cls, data: Any) -> Any:
        # Before version 5 citations were not followed: the cited nodes were what was checked.
        if isinstance(data, dict) and "followed_nodes" not in data and "cited_nodes" in data:
            return {**data, "followed_nodes": data["cited_nodes"]}
        return data


class SpanDoc(_Closed):
    """Version 4: ``[start, end)`` of a piece of a node's text, in Unicode code points of the
    text as the DAG holds it (Python ``text[start:end]``) and in UTF-16 code units (JavaScript's
    ``text.slice(start_utf16, end_utf16)``); docs/report.md#offsets."""

    start: NonNegInt
    end: NonNegInt
    start_utf16: NonNegInt
    end_utf16: NonNegInt
    sentence_index: NonNegInt | None = Field(
        default=None, description="the node's sentence (0-based) the span is, or starts in"
    )


class EvidenceSpanDoc(SpanDoc):
    """Version 4: one evidence sentence of the claim's trail, in its node's text."""

    node_id: str


class ClaimOffsetsDoc(_Open):
    """Version 4: where the claim and its evidence are in the DAG's texts (docs/report.md#offsets)."""

    located_by: Literal["verbatim", "sentences", "none"] = Field(
        description="verbatim: the claim's text found as written (its span is exact); "
        "sentences: its extraction's source sentences; none: a claim given as text without "
        "sentence_indices that is not in the output as written, or a JSON final output"
    )
    verbatim: bool = Field(
        description="the claim's text is in the final output as written (whitespace aside); "
        "false: decomposed or disambiguated, and `spans` are its source sentences'"
    )
    spans: list[SpanDoc] = Field(description="the claim in the final output")
    sentences: list[SpanDoc] = Field(description="the final-output sentences it came from")
    unsupported: list[SpanDoc] = Field(
        description="for a Not Fully Supported claim, the spans of its sentences; else empty"
    )
    evidence: list[EvidenceSpanDoc] = Field(
        description="each evidence sentence of any iteration once, in its node's text (none "
        "for a JSON node)"
    )


class ClaimDoc(_Open):
    id: str
    text: str
    sentence_indices: list[NonNegInt] = Field(
        default_factory=list,
        description="terminal-node sentences the claim came from (extraction)",
    )
    subclaims: list[str]
    verdict: Verdict | None = Field(
        description="null when the claim could not be finished (see error)"
    )
    reasoning: str
    termination: Termination
    error: str | None
    score: float | None = Field(
        default=None,
        description="soft prediction: share of Fully Supported samples in the final iteration",
    )
    review: ReviewDoc | None = None
    iterations: list[IterationDoc]
    provenance: list[list[str]] = Field(
        description="paths of evidence nodes from a source of the terminal node down to a root"
    )
    error_stages: list[Annotated[int, Field(ge=1)]]
    error_stage_status: ErrorStageStatus
    issues: list[IssueDoc] = Field(default_factory=list)
    cost: ClaimCostDoc
    citation: CitationDoc | None = None
    offsets: ClaimOffsetsDoc | None = Field(
        default=None, description="where the claim and its evidence are (version 4)"
    )

    @property
    def errored(self) -> bool:
        """The claim could not be verified: it ended in error, or has no verdict."""
        return self.termination is Termination.ERROR or self.verdict is None

    @property
    def unsupported(self) -> bool:
        """The model's final verdict is Not Fully Supported (what the gate counts)."""
        return self.verdict is Verdict.NOT_FULLY_SUPPORTED


class DagNodeDoc(_Open):
    id: str
    stage: int
    is_root: bool
    sources: list[str]
    n_sources: int | None = None
    preview: str | None = None


class DagDoc(_Open):
    path: str | None = None
    nodes: Annotated[int, Field(ge=1)]
    terminal: str
    terminal_sentences: list[str] = Field(default_factory=list)
    terminal_spans: list[SpanDoc] | None = Field(
        default=None,
        description="the spans of `terminal_sentences` in the final output's text (version 4; "
        "null when it is JSON, whose units are not slices of it)",
    )
    nodes_per_stage: dict[str, int]
    max_stage: int | None = None
    nodes_touched: list[DagNodeDoc]


class SummaryCostDoc(_Open):
    lm_calls: NonNegInt = 0
    cached_calls: NonNegInt = 0
    input_tokens: NonNegInt = 0
    output_tokens: NonNegInt = 0
    dollars: NonNegFloat | None = None
    nodes_read_mean: NonNegFloat | None = None


class SummaryDoc(_Open):
    claims: NonNegInt
    verdicts: dict[str, NonNegInt] = Field(
        description="claims per verdict name, and `error` for claims with none"
    )
    terminations: dict[str, NonNegInt] = Field(default_factory=dict)
    error_stages: dict[str, NonNegInt] = Field(description="claims per error stage")
    cost: SummaryCostDoc
    citations: dict[str, NonNegInt] | None = Field(
        default=None, description="claims per citation status (version 4, with --citations)"
    )

    def count(self, verdict: Verdict | None) -> int:
        """Claims whose final verdict is `verdict` (None: claims with none, `errors`)."""
        return self.verdicts.get(NO_VERDICT if verdict is None else verdict.value, 0)

    @property
    def errors(self) -> int:
        """Claims that could not be verified (no verdict)."""
        return self.count(None)

    @property
    def stage_counts(self) -> dict[int, int]:
        """Error stage -> claims, with the stages as numbers."""
        return {int(k): v for k, v in self.error_stages.items()}


class BatchJobDoc(_Open):
    job: str
    executor: str


class RunDoc(_Open):
    """Run metadata that differs between identical runs (times, run directory), and the gate the
    run applied (`max_unsupported`, so that a loaded report's exit code is the run's)."""

    started: str | None = None
    finished: str | None = None
    wall_seconds: NonNegFloat | None = None
    run_dir: str | None = None
    resumed_claims: NonNegInt | None = None
    max_unsupported: Annotated[float, Field(ge=0, le=1)] | None = None
    citations: str | None = Field(default=None, description="--citations (version 4)")
    max_miscited: Annotated[float, Field(ge=0, le=1)] | None = None
    notes: list[str] = Field(default_factory=list)
    fatal: str | None = None
    batch: BatchJobDoc | None = None
    partial: bool = False
    claims_total: NonNegInt | None = None
    extraction_cost: dict[str, Any] | None = None

    @property
    def extraction(self) -> SummaryCostDoc | None:
        """`extraction_cost` (the calls claim extraction made, outside any claim) typed; None
        when the run recorded none."""
        return SummaryCostDoc.model_validate(self.extraction_cost) if self.extraction_cost else None


class ReportDoc(_Open):
    """A VeriTrail report, versions 1 to 5 (2 adds a claim's optional review, 3 the model's
    kind, 4 the claims' optional citation statuses and offsets, 5 the citations' followed
    nodes)."""

    format: Literal["veritrail-report"]
    version: Literal[1, 2, 3, 4, 5]
    model: str = Field(description="provider/model, or 'oracle'")
    model_kind: ModelKind | None = Field(
        default=None,
        description="what made the verdicts (version 3; absent before: derive it from model)",
    )
    model_label: str | None = Field(
        default=None,
        description="the words shown beside every verdict of a model that is not a judge, "
        "e.g. 'demonstration, not a judge' (version 3)",
    )
    config: dict[str, Any] = Field(description="the loop settings used (VerifyConfig)")
    dag: DagDoc
    summary: SummaryDoc
    claims: list[ClaimDoc]
    run: RunDoc = Field(default_factory=RunDoc)
    g2l: dict[str, Any] | None = Field(
        default=None,
        description="G2LDetect's result attached by `veritrail detect --attach` (its own format, "
        "veritrail-g2l-report)",
    )
    sirg: dict[str, Any] | None = Field(
        default=None, description="SIRG's detection attached by `veritrail sirg` (its own format)"
    )


class ReportContractError(InputProblem, ValueError):
    """A report that does not follow the typed contract (one line naming the first problem)."""


def _problem(exc: ValidationError, what: str) -> ReportContractError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or what
    return ReportContractError(f"{what} field {where}: {first['msg']}")


def parse_report(doc: Mapping[str, Any]) -> ReportDoc:
    """`doc` as a `ReportDoc`; `ReportContractError` naming the first field that is wrong."""
    try:
        return ReportDoc.model_validate(doc)
    except ValidationError as exc:
        raise _problem(exc, "report") from None


def parse_claim(doc: Mapping[str, Any]) -> ClaimDoc:
    """One claim of a report (or of a run store's results.jsonl) as a `ClaimDoc`;
    `ReportContractError` naming the first field that is wrong."""
    try:
        return ClaimDoc.model_validate(doc)
    except ValidationError as exc:
        raise _problem(exc, "claim") from None


def report_schema() -> dict[str, Any]:
    """The JSON Schema of `ReportDoc`, as `schemas/report.schema.json` holds it."""
    schema = ReportDoc.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }


def schema_text() -> str:
    """The schema file's exact text (sorted keys, two-space indent, final newline)."""
    return json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Write `schemas/report.schema.json` from the models (the one way the file changes)."""
    SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")


if __name__ == "__main__":
    main()


__all__ = [
    "NO_VERDICT",
    "SCHEMA_FILE",
    "CitationDoc",
    "ClaimDoc",
    "ClaimOffsetsDoc",
    "DagDoc",
    "EvidenceSpanDoc",
    "IterationDoc",
    "ModelKind",
    "ReportContractError",
    "ReportDoc",
    "ReviewDoc",
    "RunDoc",
    "SpanDoc",
    "SummaryDoc",
    "parse_claim",
    "parse_report",
    "report_schema",
    "schema_text",
]
