"""Domain records shared by every step of the method, by the detectors and by the evaluation.

Everything here is a frozen dataclass or an enum: the engine passes these around, and only the
I/O boundaries (DAG file, claims file, config, report, eval dataset) convert to and from JSON.
The labelled claim (`GoldClaim`) and the evidence key (`SentenceKey`) live here rather than in
`eval.datasets` because the detectors' protocol speaks them too (`detectors.base`), and a
detector must not import the evaluation that runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    """The three verdict labels of docs/method.md#verdict, spelled exactly as in reports."""

    FULLY_SUPPORTED = "Fully Supported"
    NOT_FULLY_SUPPORTED = "Not Fully Supported"
    INCONCLUSIVE = "Inconclusive"

    @classmethod
    def parse(cls, value: str) -> Verdict:
        """Read a label leniently (case, spacing, underscores, hyphens); raise ValueError if unknown."""
        norm = " ".join(value.replace("_", " ").replace("-", " ").split()).lower()
        for member in cls:
            if member.value.lower() == norm:
                return member
        raise ValueError(f"unknown verdict label: {value!r}")


class Termination(StrEnum):
    """Why the loop stopped (docs/method.md#candidates-and-termination), or `error` when a claim could not be finished."""

    ROOTS_ONLY = "roots_only"
    NO_CANDIDATES = "no_candidates"
    Q_CONSECUTIVE_NFS = "q_consecutive_nfs"
    NO_QUALIFIED_EVIDENCE = "no_qualified_evidence"
    """Soft prediction only: samples selected sentences but none reached the vote threshold."""
    ERROR = "error"


class ErrorStageStatus(StrEnum):
    """Whether error stages could be named for a claim (docs/method.md#provenance-and-error-stages)."""

    IDENTIFIED = "identified"
    NOT_IDENTIFIABLE = "not_identifiable"
    NOT_APPLICABLE = "not_applicable"


class Step(StrEnum):
    """The name of every kind of model call the method makes, spelled exactly as in cost tables,
    `unparseable_reply` issues, progress events and the response cache's namespaces."""

    DECOMPOSITION = "decomposition"
    """Sub-claim decomposition (docs/method.md#sub-claims), also claim extraction's decomposition stage."""
    EVIDENCE_SELECTION = "evidence_selection"
    """Evidence selection (docs/method.md#evidence-selection) and its compression reruns (#verdict)."""
    VERDICT = "verdict"
    """Verdict generation (docs/method.md#verdict); each call ends an iteration of its claim."""
    CLAIM_SELECTION = "claim_selection"
    """Claim extraction: does a sentence hold verifiable content."""
    CLAIM_DISAMBIGUATION = "claim_disambiguation"
    """Claim extraction: can the sentence be read one way only."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim to verify. `sentence_indices` points at terminal-node sentences it came from."""

    id: str
    text: str
    sentence_indices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SentenceRef:
    """One sentence of one node: the unit of evidence."""

    node_id: str
    sentence_index: int
    text: str


@dataclass(frozen=True, slots=True)
class Summary:
    """An evidence summary written during selection, covering the listed nodes."""

    node_ids: tuple[str, ...]
    text: str


class IssueKind(StrEnum):
    """What a `SelectionIssue` records, spelled exactly as the report's `issues[].kind`."""

    UNKNOWN_ID = "unknown_id"
    """An id in an evidence-selection reply that the prompt never assigned (dropped)."""
    UNPARSEABLE_REPLY = "unparseable_reply"
    """A model reply that could not be read, in any step (a re-ask may have followed): `detail`
    starts with the step name and the try number."""
    PROVENANCE_TRUNCATED = "provenance_truncated"
    """The provenance lists only part of the paths (the path cap or the search budget was hit)."""


class CitationStatus(StrEnum):
    """How a claim's own citation markers compare with the sources that hold its evidence
    (`veritrail.citations`, docs/citations.md), spelled exactly as the report's
    `claims[].citation.status`."""

    SUPPORTED_BY_CITED = "supported_by_cited"
    """Fully Supported, and a cited source holds some of its evidence."""
    MISATTRIBUTED = "misattributed"
    """Fully Supported, but only by sources it does not cite."""
    CITED_NOT_SUPPORTING = "cited_not_supporting"
    """Not supported; some source holds evidence for it, none of the cited ones does."""
    UNSUPPORTED = "unsupported"
    """Not supported; no source holds any evidence for it, or only a cited one holds some."""
    UNCITED = "uncited"
    """No citation marker in the sentences it came from."""

    @property
    def miscited(self) -> bool:
        """What `--max-miscited` counts: the citation points away from the evidence."""
        return self in (CitationStatus.MISATTRIBUTED, CitationStatus.CITED_NOT_SUPPORTING)


@dataclass(frozen=True, slots=True)
class SelectionIssue:
    """Something a step had to discard or could not parse, or a cut in the trail (kept for the
    report); `kind` says which (`IssueKind`)."""

    kind: IssueKind
    detail: str

    def to_json(self) -> dict[str, str]:
        """The issue as the report, run files and claims documents write it (one place)."""
        return {"kind": str(self.kind), "detail": self.detail}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SelectionIssue:
        """Inverse of `to_json`; an unknown kind raises `ValueError`."""
        return cls(IssueKind(d["kind"]), str(d["detail"]))


@dataclass(frozen=True, slots=True)
class Iteration:
    """One round of evidence selection + verdict (docs/method.md#provenance-and-error-stages)."""

    index: int
    nodes_checked: tuple[str, ...]
    carried_roots: tuple[str, ...]
    nodes_with_evidence: tuple[str, ...]
    evidence: tuple[SentenceRef, ...]
    summaries: tuple[Summary, ...]
    dropped_ids: tuple[str, ...]
    verdict: Verdict
    reasoning: str
    verdict_called_lm: bool
    compression_reruns: int = 0
    evidence_truncated: bool = False


@dataclass(frozen=True, slots=True)
class StepCost:
    """Model usage of one step (or a total)."""

    lm_calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    cached_input_tokens: int = 0
    """Of `input_tokens`, those the provider answered from its prompt (prefix) cache. Counted
    for the summary, the eval figures and the benchmarks; not written into the report (it
    depends on what the server held, so it differs between identical runs: docs/report.md)."""

    def __add__(self, other: StepCost) -> StepCost:
        return StepCost(
            self.lm_calls + other.lm_calls,
            self.cached_calls + other.cached_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.dollars + other.dollars,
            self.cached_input_tokens + other.cached_input_tokens,
        )


@dataclass(frozen=True, slots=True)
class Cost:
    """Cost of verifying one claim (docs/method.md#provenance-and-error-stages)."""

    lm_calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    nodes_read: int = 0
    nodes_read_share: float = 0.0
    wall_seconds: float = 0.0
    per_step: dict[str, StepCost] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """Everything VeriTrail reports for one claim."""

    claim: Claim
    subclaims: tuple[str, ...]
    verdict: Verdict | None
    reasoning: str
    termination: Termination
    iterations: tuple[Iteration, ...]
    provenance: tuple[tuple[str, ...], ...]
    error_stages: tuple[int, ...]
    error_stage_status: ErrorStageStatus
    cost: Cost
    error: str | None = None
    issues: tuple[SelectionIssue, ...] = ()
    score: float | None = None
    """Soft prediction only: share of Fully Supported samples in the final iteration."""


SentenceKey = tuple[str, int]
"""(node id, 0-based sentence index within the node): one sentence as evidence, in detections,
gold labels and evidence metrics."""


def claim_key(item_id: str, claim_id: str) -> str:
    """The dataset-wide key of a claim: ``item/claim`` (or just the id when both are equal)."""
    return item_id if item_id == claim_id else f"{item_id}/{claim_id}"


@dataclass(frozen=True, slots=True)
class GoldClaim:
    """One labelled claim. `gold_evidence` holds alternative gold sets (any one of them suffices)."""

    id: str
    text: str
    label: Verdict
    gold_evidence: tuple[frozenset[SentenceKey], ...] = ()
    sentence_indices: tuple[int, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def as_claim(self, item_id: str) -> Claim:
        """The claim as the verifier sees it; its id is made unique across the dataset."""
        return Claim(
            id=claim_key(item_id, self.id), text=self.text, sentence_indices=self.sentence_indices
        )
