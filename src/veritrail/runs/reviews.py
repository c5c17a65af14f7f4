"""Reviews: a person's verdict on a claim, with a reason, kept beside the model's (docs/runs.md).

A run directory's ``reviews.jsonl`` holds one review a line, appended and never rewritten::

    {"format": "veritrail-review", "version": 1, "claim_id": "c3",
     "verdict": "Not Fully Supported", "reason": "the date is wrong", "author": "ana",
     "time": "2025-05-01T09:30:00Z", "model_verdict": "Fully Supported"}

Verdicts are spelled as reports spell them (`records.Verdict`); `model_verdict` is what the
model had said when the review was made. A review may also say where the unsupported content
entered (`veritrail review --stage N --node ID`): optional `"error_stage": 2, "nodes":
["summary-2"]`, checked against the run's DAG when the review is made; a reader that does not
know them ignores them (version 1 still). The whole history is kept; the *effective* review of a
claim is its latest line (`effective_reviews`). A torn last line (a writer killed mid-append) is
ignored on reading, and the next append starts on a fresh line, so nothing else is lost.

This module is the file format and what a report shows of it (`apply_reviews`: each reviewed
claim of a report gets a ``review`` object, report version 2); `runs.reviewing` adds a review to
a run directory and re-renders its reports.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import InputProblem
from ..records import Verdict
from ..report import ReportDoc, ReviewDoc, with_claim_reviews
from ..textio import fsync_dir, read_regular_bytes
from .layout import REVIEWS_FILE

REVIEW_FORMAT = "veritrail-review"
REVIEW_VERSION = 1

MAX_REASON_CHARS = 10_000
"""A reason longer than this is refused: a review explains a verdict, it does not paste a book."""

MAX_AUTHOR_CHARS = 200
"""An author longer than this is refused: a name, not a text (it is printed on every listing)."""

VERDICT_WORDS: dict[str, Verdict] = {
    "supported": Verdict.FULLY_SUPPORTED,
    "not-supported": Verdict.NOT_FULLY_SUPPORTED,
    "unsupported": Verdict.NOT_FULLY_SUPPORTED,
    "inconclusive": Verdict.INCONCLUSIVE,
}
"""Short names accepted for the verdicts, besides the report spellings (any case, `-` or `_`
or spaces: `fully-supported`, `Not Fully Supported`)."""


class ReviewError(InputProblem, ValueError):
    """A review cannot be made: unknown run or claim, bad verdict, empty reason (exit 2)."""


def parse_verdict(text: str) -> Verdict:
    """A verdict from its report spelling or a short name (`VERDICT_WORDS`); `ReviewError`."""
    word = "-".join(text.replace("_", " ").replace("-", " ").split()).lower()
    if word in VERDICT_WORDS:
        return VERDICT_WORDS[word]
    try:
        return Verdict.parse(text)
    except ValueError:
        names = ", ".join([*VERDICT_WORDS, *(v.value for v in Verdict)])
        raise ReviewError(f"unknown verdict {text!r}; use one of: {names}") from None


class _ReviewLine(BaseModel):
    """One line of reviews.jsonl, as read (unknown keys are kept out, not refused)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    format: str
    version: int
    claim_id: str
    verdict: str
    reason: str
    author: str
    time: str
    model_verdict: str | None = None
    error_stage: int | None = None
    nodes: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Review:
    """One review of one claim."""

    claim_id: str
    verdict: Verdict
    reason: str
    author: str
    time: str
    """When it was made: ISO 8601, UTC (`2025-05-01T09:30:00Z`)."""
    model_verdict: str | None = None
    """The model's verdict at that time (None: the claim had none)."""
    error_stage: int | None = None
    """The stage where the reviewer says the unsupported content entered (None: not said)."""
    nodes: tuple[str, ...] = ()
    """The nodes the reviewer blames at that stage."""

    def to_json(self) -> dict[str, Any]:
        """The line of reviews.jsonl."""
        out = self._core()
        if self.error_stage is not None:
            out["error_stage"] = self.error_stage
            out["nodes"] = list(self.nodes)
        return out

    def _core(self) -> dict[str, Any]:
        return {
            "format": REVIEW_FORMAT,
            "version": REVIEW_VERSION,
            "claim_id": self.claim_id,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "author": self.author,
            "time": self.time,
            "model_verdict": self.model_verdict,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Review:
        """Read one line's document (`ValueError` when it is not a review)."""
        try:
            line = _ReviewLine.model_validate(doc)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        if line.format != REVIEW_FORMAT or line.version != REVIEW_VERSION:
            raise ValueError(f"not a {REVIEW_FORMAT} line of version {REVIEW_VERSION}")
        return cls(
            claim_id=line.claim_id,
            verdict=Verdict(line.verdict),
            reason=line.reason,
            author=line.author,
            time=line.time,
            model_verdict=line.model_verdict,
            error_stage=line.error_stage,
            nodes=tuple(line.nodes or ()),
        )


@dataclass(frozen=True, slots=True)
class ClaimReview:
    """The effective review of a claim: its latest, and how many it has had."""

    latest: Review
    count: int

    def to_report(self) -> dict[str, Any]:
        """The claim's ``review`` object in a report (version 2)."""
        r = self.latest
        out: dict[str, Any] = {
            "verdict": r.verdict.value,
            "reason": r.reason,
            "author": r.author,
            "time": r.time,
            "count": self.count,
        }
        if r.error_stage is not None:
            # Report version 3: the stage and nodes a person set (the model's stay as they were).
            out["error_stage"] = r.error_stage
            out["nodes"] = list(r.nodes)
        return out


def read_reviews(run_dir: str | Path) -> list[Review]:
    """Every review of a run directory, oldest first (none without a reviews.jsonl). A line
    that is not a review (the torn remains of a killed append) is skipped."""
    try:
        data = read_regular_bytes(Path(run_dir) / REVIEWS_FILE)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ReviewError(f"{Path(run_dir) / REVIEWS_FILE}: cannot read it: {exc}") from None
    out: list[Review] = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(Review.from_json(orjson.loads(line)))
        except (orjson.JSONDecodeError, ValueError):
            continue
    return out


def effective_reviews(reviews: Iterable[Review]) -> dict[str, ClaimReview]:
    """Claim id -> its latest review and review count (file order decides "latest": appends are
    in time order, and a clock set back must not reorder them)."""
    out: dict[str, ClaimReview] = {}
    for r in reviews:
        prev = out.get(r.claim_id)
        out[r.claim_id] = ClaimReview(r, (prev.count if prev else 0) + 1)
    return out


def append_review(run_dir: str | Path, review: Review) -> None:
    """Append one review to the run directory's reviews.jsonl and make it durable (write, flush,
    fsync; the directory too when the file is new). When the file's last line is torn, the new
    line starts on a fresh line so that it is read back whole."""
    path = Path(run_dir) / REVIEWS_FILE
    line = orjson.dumps(review.to_json()) + b"\n"
    created = not path.exists()
    with _open_log(path) as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                line = b"\n" + line
        # One write: with O_APPEND, two reviewers' lines never interleave.
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        fsync_dir(path.parent)


def _open_log(path: Path) -> IO[bytes]:
    """reviews.jsonl opened to append, never through a symbolic link (a link planted in a run
    directory would make a review write into any file its reader may write) and only as a
    regular file (a FIFO would block). `ReviewError` (exit 2) otherwise."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise ReviewError(
                f"{path} is a symbolic link; a review is only appended to the run's own file"
            ) from None
        raise ReviewError(f"{path}: cannot write it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ReviewError(f"{path}: not a regular file; a review is only appended to one")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a+b")


def apply_reviews(report: Mapping[str, Any], reviews: Mapping[str, ClaimReview]) -> dict[str, Any]:
    """A copy of `report` (any readable version) as the current version, each reviewed claim with
    its ``review`` object (`ClaimReview.to_report`); a claim without a review has none (a stale
    one is dropped). The model's ``verdict`` is never changed (`report.with_claim_reviews`)."""

    def review_of(claim_id: str) -> dict[str, Any] | None:
        got = reviews.get(claim_id)
        return got.to_report() if got is not None else None

    return with_claim_reviews(report, review_of)


def reviewed_doc(doc: ReportDoc, reviews: Mapping[str, ClaimReview]) -> ReportDoc:
    """A typed report with each claim's ``review`` the effective one of `reviews` (none: the
    claim has none), for a reader (`veritrail diff`); `apply_reviews` does the same to a report
    document that is written."""

    def review_of(claim_id: str) -> ReviewDoc | None:
        got = reviews.get(claim_id)
        return ReviewDoc.model_validate(got.to_report()) if got is not None else None

    claims = [c.model_copy(update={"review": review_of(c.id)}) for c in doc.claims]
    return doc.model_copy(update={"claims": claims})


__all__ = [
    "MAX_AUTHOR_CHARS",
    "MAX_REASON_CHARS",
    "REVIEWS_FILE",
    "REVIEW_FORMAT",
    "REVIEW_VERSION",
    "VERDICT_WORDS",
    "ClaimReview",
    "Review",
    "ReviewError",
    "append_review",
    "apply_reviews",
    "effective_reviews",
    "parse_verdict",
    "read_reviews",
    "reviewed_doc",
]
