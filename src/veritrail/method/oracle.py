"""The oracle: all three steps answered from a JSON file instead of a model.

For tests, for reproducing worked examples, and for ablations with perfect evidence. Format::

    {"claims": [{"claim": "exact claim text",
                 "subclaims": ["optional", "..."],
                 "evidence": {"<node id>": [0, 3]},
                 "summaries": {"<node id>": "optional summary text"},
                 "verdicts": ["Fully Supported", "Not Fully Supported", "Inconclusive"]}]}

Whenever evidence selection reads a node listed under `evidence`, the oracle selects those
sentence indices (0-based); unlisted nodes yield nothing. An index past the node's last sentence
is returned as an unknown id, so the engine drops and records it like any invented id.
`verdicts` are consumed one per verdict call of that claim, in order; when exhausted the last one
repeats. Decomposition of the claim text returns `subclaims` (if two or more), and every other
text is final.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import InputProblem
from ..records import Claim, Verdict
from ..textio import InputError, read_input_json
from .steps import EvidenceBatch, RawSelection, Steps, VerdictInput, VerdictOutcome


class OracleError(InputProblem, RuntimeError):
    """The oracle file is invalid, or has no answer for a claim the run asked about."""


class _OracleClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim: str
    subclaims: list[str] = Field(default_factory=list)
    evidence: dict[str, list[int]] = Field(default_factory=dict)
    summaries: dict[str, str] = Field(default_factory=dict)
    verdicts: list[str] = Field(default_factory=list)

    @field_validator("verdicts")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        for label in v:
            Verdict(label)  # exact labels only: the oracle file is a contract, not a model reply
        return v


class _OracleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claims: list[_OracleClaim]


@dataclass(frozen=True, slots=True)
class OracleAnswer:
    """The oracle's answers for one claim."""

    subclaims: tuple[str, ...]
    evidence: dict[str, tuple[int, ...]]
    summaries: dict[str, str]
    verdicts: tuple[Verdict, ...]


_NOTHING = RawSelection((), "")


def _one_line(exc: ValidationError, limit: int = 5) -> str:
    """A pydantic error list on one line: `claims.0.verdicts.1: <message>; ...`."""
    errors = exc.errors(include_url=False)
    parts = []
    for e in errors[:limit]:
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        parts.append(f"{loc}: {e['msg']}")
    more = f"; … (+{len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


class Oracle:
    """Implements Decomposer, EvidenceSelector and VerdictGenerator from oracle answers."""

    def __init__(self, answers: dict[str, OracleAnswer]) -> None:
        self.answers = answers
        self._verdict_calls: dict[str, int] = {}

    @classmethod
    def from_dict(cls, doc: Any, *, origin: str = "oracle file") -> Oracle:
        """Build from a decoded oracle document (validated); `origin` starts error messages."""
        try:
            parsed = _OracleFile.model_validate(doc)
        except ValidationError as exc:
            raise OracleError(f"{origin}: invalid: {_one_line(exc)}") from None
        answers: dict[str, OracleAnswer] = {}
        for c in parsed.claims:
            if c.claim in answers:
                raise OracleError(f"{origin}: the claim is listed twice: {c.claim!r}")
            answers[c.claim] = OracleAnswer(
                tuple(c.subclaims),
                {k: tuple(v) for k, v in c.evidence.items()},
                dict(c.summaries),
                tuple(Verdict(v) for v in c.verdicts),
            )
        return cls(answers)

    @classmethod
    def from_file(cls, path: str | Path) -> Oracle:
        """Load an oracle file (input rules of `veritrail.textio`; `OracleError` names the file)."""
        try:
            doc = read_input_json(path, "oracle file")
        except InputError as exc:
            raise OracleError(str(exc)) from None
        return cls.from_dict(doc, origin=f"oracle file {path}")

    def steps(self) -> Steps:
        """The oracle as all three steps."""
        return Steps(self, self, self)

    def _answer(self, claim: Claim) -> OracleAnswer:
        try:
            return self.answers[claim.text]
        except KeyError:
            raise OracleError(
                f"the oracle has no entry for claim {claim.id}: {claim.text!r}"
            ) from None

    async def decompose(self, claim: Claim, text: str) -> list[str]:
        """The listed sub-claims for the claim itself; any other text is final."""
        ans = self._answer(claim)
        if text == claim.text and len(ans.subclaims) >= 2:
            return list(ans.subclaims)
        return [text]

    async def select(
        self, claim: Claim, subclaims: Sequence[str], batch: EvidenceBatch, *, sample: int = 0
    ) -> RawSelection:
        """The listed sentences of the nodes in `batch` (as prompt ids)."""
        ans = self._answer(claim)
        if not any(e.node_id in ans.evidence for e in batch.excerpts):
            return _NOTHING
        ids: list[str | int] = []
        node_summaries: list[tuple[str, str]] = []
        for e in batch.excerpts:
            wanted = ans.evidence.get(e.node_id)
            if not wanted:
                continue
            picked = [pid for i in wanted if (pid := e.prompt_id(i)) is not None]
            ids.extend(picked)
            # Indices beyond the node's last sentence are reported once, by the excerpt that ends
            # the node, so that the engine drops and records them like invented ids.
            if e.ends_node and len(e):
                last = e.indices[-1]
                ids.extend(f"{e.node_id}#{i}" for i in wanted if i > last)
            if picked and e.node_id in ans.summaries:
                node_summaries.append((e.node_id, ans.summaries[e.node_id]))
        summary = "; ".join(t for _, t in node_summaries)
        return RawSelection(tuple(ids), summary, node_summaries=tuple(node_summaries))

    async def judge(
        self,
        claim: Claim,
        subclaims: Sequence[str],
        evidence: Sequence[VerdictInput],
        *,
        sample: int = 0,
    ) -> VerdictOutcome:
        """The next listed verdict for this claim (the last one repeats)."""
        ans = self._answer(claim)
        if not ans.verdicts:
            raise OracleError(
                f"the oracle lists no verdicts for claim {claim.id} but a verdict was needed"
            )
        if sample == 0:
            n = self._verdict_calls.get(claim.id, 0)
            self._verdict_calls[claim.id] = n + 1
        else:
            n = self._verdict_calls.get(claim.id, 1) - 1
        v = ans.verdicts[min(n, len(ans.verdicts) - 1)]
        items = ", ".join("+".join(i.node_ids) for i in evidence)
        return VerdictOutcome(v, f"oracle verdict #{n + 1} over evidence from {items}")
