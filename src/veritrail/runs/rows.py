"""The index's rows as Python records, and the conversions between them, the run files'
records (`files.RunRecord`) and the database's columns (`schema`).

`RunRow` (a run), `ClaimRow` (a claim of a run), `RunFilter` (which runs a listing returns) and
`RefreshStats` (what a refresh did) are what `RunIndex` hands out; `run_values`/`claim_values`
turn a `RunRecord` into the values of the rows it writes, `run_row`/`claim_row` read them back.
Times are seconds since the epoch in the database, aware UTC datetimes here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..records import Verdict
from .files import RunRecord


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def epoch(value: datetime | float | None) -> float | None:
    """Seconds since the epoch of a filter's time (a naive datetime is UTC)."""
    if value is None or isinstance(value, float | int):
        return value
    if value.tzinfo is None:  # a naive time is UTC, as every time of the index
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs `RunIndex.list_runs` returns; every field left None matches all."""

    dag: str | None = None
    """Part of the DAG's name or of its pipeline name (any case)."""
    model: str | None = None
    """Part of the model name (any case)."""
    since: datetime | float | None = None
    """Created at or after (a naive datetime is UTC; a float is seconds since the epoch)."""
    until: datetime | float | None = None
    """Created before (exclusive)."""
    status: str | None = None
    """run.json's status exactly: running, interrupted, complete, incomplete."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """One indexed run."""

    id: str
    path: Path
    fingerprint: str
    dag: str
    pipeline: str | None
    dag_path: str | None
    model: str
    status: str
    created: datetime
    updated: datetime
    claims: int
    verified: int
    """Claims with a verdict or an error (the others are not verified yet)."""
    supported: int
    not_supported: int
    inconclusive: int
    errors: int
    unsupported_share: float | None
    """Not Fully Supported / claims (as `--max-unsupported` counts), the model's verdicts."""
    reviewed: int
    """Claims with a review."""
    reviewed_unsupported_share: float | None
    """The same share with each review's verdict in place of the model's."""
    dollars: float
    lm_calls: int
    has_report: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (`veritrail runs --json`): times as ISO 8601 UTC."""
        d = asdict(self)
        d["path"] = str(self.path)
        d["created"] = self.created.isoformat(timespec="seconds")
        d["updated"] = self.updated.isoformat(timespec="seconds")
        return d


@dataclass(frozen=True, slots=True)
class ClaimRow:
    """One indexed claim of a run."""

    run_id: str
    position: int
    claim_id: str
    text: str
    key: str
    """`keys.claim_text_key` of the text: equal across runs for the same normalised text."""
    sources: tuple[str, ...]
    """The root nodes its provenance reaches (`keys.claim_sources`)."""
    sentence_indices: tuple[int, ...]
    verdict: str | None
    termination: str | None
    error_stages: tuple[int, ...]
    error_stage_status: str | None
    score: float | None
    review_verdict: str | None
    review_reason: str | None
    review_author: str | None
    review_time: str | None
    review_count: int

    @property
    def effective_verdict(self) -> str | None:
        """The review's verdict when reviewed, else the model's."""
        return self.review_verdict or self.verdict

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RefreshStats:
    """What a refresh or a rebuild did."""

    scanned: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    failed: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """(run directory, why) of the directories that could not be read (left out)."""
    seconds: float = 0.0
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """What is wrong with runs read now and listed all the same (`RunRecord.warning`)."""


def run_values(rec: RunRecord, root: str, name: str) -> dict[str, Any]:
    """The ``runs`` row of a run (`root`: the index's root, `name`: the run's id)."""
    share = rec.unsupported_share()
    return {
        "root": root,
        "name": name,
        "path": str(rec.path.resolve()),
        "fingerprint": rec.fingerprint,
        "dag": rec.dag,
        "pipeline": rec.pipeline,
        "dag_path": rec.dag_path,
        "model": rec.model,
        "status": rec.status,
        "created": rec.created,
        "updated": rec.updated,
        "claims": len(rec.claims),
        "verified": sum(1 for c in rec.claims if c.termination is not None),
        "supported": rec.count(Verdict.FULLY_SUPPORTED),
        "not_supported": rec.count(Verdict.NOT_FULLY_SUPPORTED),
        "inconclusive": rec.count(Verdict.INCONCLUSIVE),
        "errors": rec.errors,
        "unsupported_share": share,
        "reviewed": rec.reviewed,
        "reviewed_unsupported_share": rec.unsupported_share(reviewed=True),
        "dollars": rec.dollars,
        "lm_calls": rec.lm_calls,
        "has_report": rec.has_report,
        "signature": rec.signature,
        "indexed": time.time(),
    }


def _json(values: tuple[Any, ...]) -> str:
    return orjson.dumps(values).decode()


def claim_values(rec: RunRecord, run_pk: int) -> list[dict[str, Any]]:
    """The ``claims`` rows of a run whose ``runs`` row has key `run_pk`."""
    out = []
    for c in rec.claims:
        r = c.review.latest if c.review else None
        out.append(
            {
                "run_pk": run_pk,
                "position": c.position,
                "claim_id": c.claim_id,
                "text": c.text,
                "key": c.key,
                "sources": _json(c.sources),
                "sentence_indices": _json(c.sentence_indices),
                "verdict": c.verdict,
                "termination": c.termination,
                "error_stages": _json(c.error_stages),
                "error_stage_status": c.error_stage_status,
                "score": c.score,
                "review_verdict": r.verdict.value if r else None,
                "review_reason": r.reason if r else None,
                "review_author": r.author if r else None,
                "review_time": r.time if r else None,
                "review_count": c.review.count if c.review else 0,
            }
        )
    return out


def run_row(m: Any) -> RunRow:
    """A `RunRow` from a ``runs`` row (a mapping of its columns)."""
    return RunRow(
        id=m["name"],
        path=Path(m["path"]),
        fingerprint=m["fingerprint"],
        dag=m["dag"],
        pipeline=m["pipeline"],
        dag_path=m["dag_path"],
        model=m["model"],
        status=m["status"],
        created=_utc(m["created"]),
        updated=_utc(m["updated"]),
        claims=m["claims"],
        verified=m["verified"],
        supported=m["supported"],
        not_supported=m["not_supported"],
        inconclusive=m["inconclusive"],
        errors=m["errors"],
        unsupported_share=m["unsupported_share"],
        reviewed=m["reviewed"],
        reviewed_unsupported_share=m["reviewed_unsupported_share"],
        dollars=m["dollars"],
        lm_calls=m["lm_calls"],
        has_report=bool(m["has_report"]),
    )


def claim_row(run_id: str, m: Any) -> ClaimRow:
    """A `ClaimRow` from a ``claims`` row (a mapping of its columns)."""
    return ClaimRow(
        run_id=run_id,
        position=m["position"],
        claim_id=m["claim_id"],
        text=m["text"],
        key=m["key"],
        sources=tuple(orjson.loads(m["sources"])),
        sentence_indices=tuple(orjson.loads(m["sentence_indices"])),
        verdict=m["verdict"],
        termination=m["termination"],
        error_stages=tuple(orjson.loads(m["error_stages"])),
        error_stage_status=m["error_stage_status"],
        score=m["score"],
        review_verdict=m["review_verdict"],
        review_reason=m["review_reason"],
        review_author=m["review_author"],
        review_time=m["review_time"],
        review_count=m["review_count"],
    )


__all__ = [
    "ClaimRow",
    "RefreshStats",
    "RunFilter",
    "RunRow",
    "claim_row",
    "claim_values",
    "epoch",
    "run_row",
    "run_values",
]
