"""Reading run directories as the run layer writes them (docs/running.md, "Runs are durable").

`find_run_dirs` finds the run directories under a runs directory, `run_signature` tells cheaply
whether one changed since it was indexed (sizes and modification times of its files), and
`read_run_dir` reads one into a `RunRecord` (one row of the index) with its `ClaimRecord`s.

The file names are the run layer's (`layout`): this module reads the files and never imports
the run layer, so `veritrail eval` can read reviewed runs.
A run that has not finished is read from `results.jsonl` (the last line of a claim wins; a torn
last line is ignored, as the run store does) and `claims.json`; reviews from `reviews.jsonl`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import InputProblem
from ..records import Claim, Verdict
from ..report import ClaimDoc
from ..textio import read_regular_bytes
from .keys import claim_sources, claim_text_key
from .layout import (
    CLAIMS_FILE,
    DAG_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    REVIEWS_FILE,
    RUN_FILE,
    RUN_FORMAT,
)
from .reviews import ClaimReview, ReviewError, effective_reviews, read_reviews

SIGNATURE_FILES = (RUN_FILE, CLAIMS_FILE, RESULTS_FILE, REPORT_FILE, REVIEWS_FILE)
"""The files whose change means the run must be read again."""

RACY_SECONDS = 2.0
"""A run changed less than this long before it was read is read again at the next refresh
(`run_signature`)."""

MAX_DEPTH = 2
"""How deep below the runs directory run directories are looked for (a batch may group its
runs one level down)."""

PIPELINE_META_BYTES = 4 << 20
"""A DAG file up to this size is read for its `meta.pipeline` name; a larger one is not (a
GraphRAG DAG can be hundreds of MB, and the name is a convenience)."""


class RunDirError(InputProblem, ValueError):
    """A directory is not a readable run directory (the message names it and why)."""


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim of a run as the index keeps it."""

    position: int
    claim_id: str
    text: str
    key: str
    """`keys.claim_text_key` of the text."""
    sources: tuple[str, ...]
    """`keys.claim_sources`: the roots its provenance reaches."""
    sentence_indices: tuple[int, ...]
    verdict: str | None
    """The model's verdict as reports spell it; None while unverified or after an error."""
    termination: str | None
    """Why the loop stopped (`None`: not verified yet)."""
    error_stages: tuple[int, ...]
    error_stage_status: str | None
    score: float | None
    review: ClaimReview | None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run directory as the index keeps it (figures computed from its claims)."""

    path: Path
    fingerprint: str
    dag: str
    """The DAG's name: its file's stem (for a DAG given in memory, the run directory's name)."""
    pipeline: str | None
    """The DAG's `meta.pipeline`, when the DAG file is readable and small enough."""
    dag_path: str | None
    model: str
    status: str
    created: float
    updated: float
    """Seconds since the epoch (run.json's times)."""
    claims: tuple[ClaimRecord, ...]
    """Every claim of claims.json, in order, verified or not."""
    dollars: float
    lm_calls: int
    has_report: bool
    signature: str
    warning: str | None = None
    """What is wrong with a run that is still listed (results.jsonl cut short), for a warning."""

    def count(self, verdict: Verdict) -> int:
        """Claims whose model verdict is `verdict`."""
        return sum(1 for c in self.claims if c.verdict == verdict.value)

    @property
    def errors(self) -> int:
        """Claims verified but left without a verdict (an error)."""
        return sum(1 for c in self.claims if c.verdict is None and c.termination is not None)

    @property
    def reviewed(self) -> int:
        """Claims with a review."""
        return sum(1 for c in self.claims if c.review is not None)

    def unsupported_share(self, *, reviewed: bool = False) -> float | None:
        """Share of the claims judged Not Fully Supported (as `--max-unsupported` counts: over
        every claim of the run, errors included); `reviewed`: a review's verdict replaces the
        model's. None for a run without claims, or none finished yet (a run that has just
        started is not "0% unsupported", in the list or the trend chart)."""
        if not any(c.verdict is not None or c.termination is not None for c in self.claims):
            return None
        nfs = Verdict.NOT_FULLY_SUPPORTED.value
        n = 0
        for c in self.claims:
            verdict = c.review.latest.verdict.value if reviewed and c.review else c.verdict
            n += verdict == nfs
        return n / len(self.claims)


def is_run_dir(path: str | Path) -> bool:
    """Whether `path` holds a run.json (a run directory, or the start of one)."""
    return os.path.isfile(os.path.join(path, RUN_FILE))


def find_run_dirs(root: str | Path, *, max_depth: int = MAX_DEPTH) -> list[Path]:
    """The run directories under `root` (`root` itself included), sorted, at most `max_depth`
    levels down; a run directory's own subdirectories are not searched. Hidden directories and
    unreadable ones are skipped. (Plain `os` calls on strings: a listing walks a thousand
    directories, and pathlib's object per step was most of its time.)"""
    base = os.fspath(root)
    if is_run_dir(base):
        return [Path(base)]
    found: list[str] = []

    def walk(d: str, depth: int) -> None:
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                continue
            if is_run_dir(e.path):
                found.append(e.path)
            elif depth < max_depth:
                walk(e.path, depth + 1)

    walk(base, 1)
    return [Path(p) for p in found]


def run_signature(path: str | Path, *, now: float | None = None) -> str:
    """What tells that a run changed: the sizes and modification times of its files
    (`SIGNATURE_FILES`; every writer replaces a file or appends to it, both of which move
    them). A few `stat` calls: a listing makes them for every run.

    With `now` (the time of reading), a signature whose newest time is less than `RACY_SECONDS`
    old gets a mark that no later signature has, so the next refresh reads the run again: a
    change in the same tick of the file system's clock would not move the times."""
    base = os.fspath(path)
    newest = 0
    parts = []
    for name in SIGNATURE_FILES:
        try:
            st = os.stat(os.path.join(base, name))
        except OSError:
            parts.append(f"{name}:-")
            continue
        newest = max(newest, st.st_mtime_ns)
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    if now is not None and now - newest / 1e9 < RACY_SECONDS:
        parts.append("racy")
    return "|".join(parts)


def _load_json(path: Path) -> Any:
    try:
        return orjson.loads(read_regular_bytes(path))
    except FileNotFoundError:
        raise RunDirError(f"{path.parent} is not a run directory (no {path.name})") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: cannot read it: {exc}") from None


class ClaimCostTotals(BaseModel):
    """Calls and dollars of a cost block (what the index sums)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    lm_calls: int = 0
    dollars: float = 0.0


class _DagInput(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    path: str | None = None


class _RunInputs(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    dag: _DagInput | None = None


class _RunExtra(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    extraction_cost: ClaimCostTotals | None = None


class RunJson(BaseModel):
    """run.json as this module reads it (the run layer's file; `run.store` writes it): the
    fields the index shows (a field of another type is a `RunDirError`)."""

    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    format: str
    fingerprint: str = ""
    model: str = ""
    status: str = "running"
    created: float = 0.0
    updated: float = 0.0
    inputs: _RunInputs | None = None
    extra: _RunExtra | None = None

    @property
    def dag_path(self) -> str | None:
        """The DAG file the run verified (`inputs.dag.path`), when it names one."""
        dag = self.inputs.dag if self.inputs is not None else None
        return dag.path if dag is not None and dag.path else None

    @property
    def extraction_cost(self) -> ClaimCostTotals:
        """The calls claim extraction made outside any claim (`extra.extraction_cost`)."""
        cost = self.extra.extraction_cost if self.extra is not None else None
        return cost if cost is not None else ClaimCostTotals()


class _StoredClaim(BaseModel):
    """One entry of claims.json (the claims file's objects: `method.claims`)."""

    model_config = ConfigDict(extra="ignore", frozen=True, coerce_numbers_to_str=True)

    id: str
    text: str = ""
    sentence_indices: list[int] = []


def load_run_json(path: str | Path) -> RunJson:
    """run.json's document, format-checked (`RunDirError`)."""
    p = Path(path)
    run = _load_json(p / RUN_FILE)
    not_a_run = RunDirError(f'{p / RUN_FILE}: not a VeriTrail run (no "format": "{RUN_FORMAT}")')
    try:
        doc = RunJson.model_validate(run)
    except ValidationError as exc:
        first = exc.errors()[0]
        if not isinstance(run, dict) or first["loc"][:1] == ("format",):
            raise not_a_run from None
        where = ".".join(str(x) for x in first["loc"])
        raise RunDirError(
            f"{p}: unexpected content in the run files: {p / RUN_FILE} field {where}: "
            f"{first['msg']}"
        ) from None
    if doc.format != RUN_FORMAT:
        raise not_a_run
    return doc


def load_claims(path: str | Path) -> list[Claim]:
    """claims.json's list of claims (`RunDirError`)."""
    p = Path(path)
    doc = _load_json(p / CLAIMS_FILE)
    if not isinstance(doc, list):
        raise RunDirError(f"{p / CLAIMS_FILE}: not a list of claims")
    try:
        entries = [_StoredClaim.model_validate(c) for c in doc]
    except ValidationError as exc:
        raise RunDirError(
            f"{p / CLAIMS_FILE}: not a list of claims ({exc.errors()[0]['msg']})"
        ) from None
    return [Claim(c.id, c.text, tuple(c.sentence_indices)) for c in entries]


def read_results(path: str | Path) -> dict[str, ClaimDoc]:
    """results.jsonl's last result line per claim id, each a report claim (`ClaimDoc`); reading
    stops at a torn or unreadable line (what the run store discards too)."""
    return _read_results(Path(path))[0]


def _read_results(path: Path) -> tuple[dict[str, ClaimDoc], bool]:
    """`read_results`, and whether the file was cut short (a torn last line, or a line that
    is not a result: what follows it is not read)."""
    out: dict[str, ClaimDoc] = {}
    f = path / RESULTS_FILE
    try:
        data = read_regular_bytes(f)
    except FileNotFoundError:
        return out, False
    except OSError as exc:
        raise RunDirError(f"{f}: cannot read it: {exc}") from None
    lines = data.split(b"\n")
    torn = bool(lines[-1].strip())  # the part after the last newline is torn, if any
    for line in lines[:-1]:
        if not line.strip():
            continue
        try:
            # Parsed and validated in one pass (our own file: the run store wrote each line).
            claim = ClaimDoc.model_validate_json(line)
        except ValidationError:
            return out, True
        out[claim.id] = claim
    return out, torn


def dag_name(run_dir: Path, dag_path: str | None) -> str:
    """The name a run's DAG is listed by (`RunRecord.dag`; the view's trend chart groups by it).

    The DAG's own `meta.name` (or `meta.title`) when it has one; else its file's stem, with the
    folder in front when the file is called `dag.json` (every pipeline writes one: two
    pipelines' runs must not both be "dag"); for a DAG given in memory (`veritrail check`), the
    name its run directory carries."""
    if dag_path:
        p = Path(dag_path)
        own = _meta_field(dag_path, "name") or _meta_field(dag_path, "title")
        if own:
            return own
        if p.name != DAG_FILE or p.parent.resolve() != run_dir.resolve():
            if p.name == DAG_FILE and p.parent.name:
                return f"{p.parent.name}/{p.stem}"
            return p.stem
    # A DAG given in memory: the run directory is named `<name>-<12 hex digits>`.
    stem, _, digits = run_dir.name.rpartition("-")
    return stem if stem and len(digits) == 12 else run_dir.name


def pipeline_name(dag_path: str | None) -> str | None:
    """`meta.pipeline` of a DAG file (JSON or JSON Lines), when readable and small; else None."""
    return _meta_field(dag_path, "pipeline")


def _meta_field(dag_path: str | None, key: str) -> str | None:
    """`meta[key]` of a DAG file (JSON or JSON Lines) when it is a non-empty string and the file
    is readable and small; else None."""
    if not dag_path:
        return None
    p = Path(dag_path)
    try:
        if p.stat().st_size > PIPELINE_META_BYTES:
            return None
        data = read_regular_bytes(p)
        if p.suffix in (".jsonl", ".ndjson"):
            data = data.split(b"\n", 1)[0]
        doc = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError):
        return None
    meta = doc.get("meta") if isinstance(doc, dict) else None
    name = meta.get(key) if isinstance(meta, dict) else None
    return name.strip()[:200] if isinstance(name, str) and name.strip() else None


def _claim_record(
    position: int,
    claim: Claim,
    result: ClaimDoc | None,
    review: ClaimReview | None,
) -> ClaimRecord:
    return ClaimRecord(
        position=position,
        claim_id=claim.id,
        text=claim.text,
        key=claim_text_key(claim.text),
        sources=claim_sources(result) if result is not None else (),
        sentence_indices=claim.sentence_indices,
        verdict=result.verdict.value if result is not None and result.verdict else None,
        termination=result.termination.value if result is not None else None,
        error_stages=tuple(result.error_stages) if result is not None else (),
        error_stage_status=result.error_stage_status.value if result is not None else None,
        score=result.score if result is not None else None,
        review=review,
    )


def read_run_dir(path: str | Path) -> RunRecord:
    """Read one run directory (`RunDirError` when it is not one or cannot be read)."""
    p = Path(path)
    # Before reading: a change meanwhile is seen next time.
    signature = run_signature(p, now=time.time())
    run = load_run_json(p)
    claims_doc = load_claims(p)
    results, torn = _read_results(p)
    try:
        reviews = effective_reviews(read_reviews(p))
    except ReviewError as exc:  # an unreadable reviews.jsonl: this run is left out, not all
        raise RunDirError(str(exc)) from None
    claims: list[ClaimRecord] = []
    dollars = 0.0
    lm_calls = 0
    try:
        for i, c in enumerate(claims_doc):
            r = results.get(c.id)
            claims.append(_claim_record(i, c, r, reviews.get(c.id)))
            if r is not None:
                dollars += r.cost.dollars or 0.0
                lm_calls += r.cost.lm_calls
        extraction = run.extraction_cost
        dollars += extraction.dollars
        lm_calls += extraction.lm_calls
        dag_path = run.dag_path
        status = run.status
        warning = None
        if torn:
            # A run whose results were cut (a disk full, a copy interrupted) is not what
            # run.json says it is: its missing claims show as not verified, and it is not
            # listed as complete.
            verified = sum(1 for c in claims if c.termination is not None)
            warning = (
                f"{p / RESULTS_FILE} is cut short (its last line is torn): {verified} of "
                f"{len(claims)} claims read; `veritrail resume {p}` verifies the rest"
            )
            if status == "complete":
                status = "incomplete"
        return RunRecord(
            path=p,
            fingerprint=run.fingerprint,
            dag=dag_name(p, dag_path),
            pipeline=pipeline_name(dag_path),
            dag_path=dag_path,
            model=run.model,
            status=status,
            created=run.created,
            updated=run.updated,
            claims=tuple(claims),
            dollars=round(dollars, 6),
            lm_calls=lm_calls,
            has_report=(p / REPORT_FILE).is_file(),
            signature=signature,
            warning=warning,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"{p}: unexpected content in the run files: {exc!r}") from None


def iter_run_records(paths: Sequence[Path]) -> Iterator[RunRecord | RunDirError]:
    """`read_run_dir` of each path, a `RunDirError` in place of a run that cannot be read."""
    for path in paths:
        try:
            yield read_run_dir(path)
        except RunDirError as exc:
            yield exc


__all__ = [
    "RACY_SECONDS",
    "SIGNATURE_FILES",
    "ClaimCostTotals",
    "ClaimRecord",
    "RunDirError",
    "RunJson",
    "RunRecord",
    "dag_name",
    "find_run_dirs",
    "is_run_dir",
    "iter_run_records",
    "load_claims",
    "load_run_json",
    "pipeline_name",
    "read_results",
    "read_run_dir",
    "run_signature",
]
