"""Adding a review to a run directory, and showing reviews in its reports (docs/runs.md).

`add_review` checks the run directory and the claim, appends the review (`reviews.append_review`,
fsync'ed) and then re-writes the run directory's reports with every effective review in them
(`update_run_reports`: ``report.json`` and ``partial-report.json`` get each reviewed claim's
``review`` object, ``report.html`` is rendered again). The run layer writes a run's reports with
`report_with_reviews`, so a re-run or ``veritrail resume`` keeps showing them: reviews live in
``reviews.jsonl``, which no run ever writes.

While a run holds its directory's lock (it is running), the reports are left alone: the run
writes them when it ends, with the reviews in. The review itself is appended all the same.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ..redaction import redact
from ..report import ReportDoc, ReportFormatError, read_report, write_report
from .files import RunDirError, load_claims, load_run_json, read_results
from .layout import HTML_REPORT, LOCK_FILE, PARTIAL_REPORT, REPORT_FILE, REVIEWS_FILE
from .reviews import (
    MAX_AUTHOR_CHARS,
    MAX_REASON_CHARS,
    Review,
    ReviewError,
    append_review,
    apply_reviews,
    effective_reviews,
    parse_verdict,
    read_reviews,
    reviewed_doc,
)


@dataclass(frozen=True, slots=True)
class ReportsUpdate:
    """What `update_run_reports` did."""

    written: tuple[Path, ...]
    busy: bool
    """True when a run held the directory: nothing was rewritten (the run will, when it ends)."""


def default_author() -> str:
    """The operating system's user name (`unknown` when there is none)."""
    try:
        return getpass.getuser() or "unknown"
    except (OSError, KeyError):  # no user database entry (a container's anonymous uid)
        return "unknown"


def now_utc() -> str:
    """The time now, as reviews record it (ISO 8601, UTC, seconds, `Z`)."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def add_review(
    run_dir: str | Path,
    claim_id: str,
    verdict: str,
    reason: str,
    *,
    author: str | None = None,
    time: str | None = None,
    update_reports: bool = True,
    stage: int | None = None,
    node: str | None = None,
) -> Review:
    """Review one claim of a run: append the review and (`update_reports`) re-write the run's
    reports with it. Raises `ReviewError` (exit 2) for a directory that is not a run, a claim
    id the run does not have, an unknown verdict (`reviews.parse_verdict`), an empty or
    over-long reason, or a `stage`/`node` the run's DAG does not have (`node` must be a node of
    that stage; a node alone gives its stage). `author` defaults to the OS user, `time` to now
    (UTC). The reason and the author pass through the redaction of every text veritrail
    writes."""
    p = Path(run_dir)
    try:
        load_run_json(p)
        claims = load_claims(p)
    except RunDirError as exc:
        raise ReviewError(str(exc)) from None
    ids = {c.id for c in claims}
    if claim_id not in ids:
        raise ReviewError(f"{p}: the run has no claim {claim_id!r} ({len(ids)} claims)")
    v = parse_verdict(verdict)
    text = reason.strip()
    if not text:
        raise ReviewError("a review needs a reason (--reason TEXT)")
    if len(text) > MAX_REASON_CHARS:
        raise ReviewError(f"the reason is longer than {MAX_REASON_CHARS:,} characters")
    where = _check_stage(p, stage, node) if stage is not None or node is not None else None
    who = (author or "").strip() or default_author()
    if len(who) > MAX_AUTHOR_CHARS:
        raise ReviewError(f"the author is longer than {MAX_AUTHOR_CHARS} characters")
    result = read_results(p).get(claim_id)
    review = Review(
        claim_id=claim_id,
        verdict=v,
        reason=redact(text),
        author=redact(who),
        time=time or now_utc(),
        model_verdict=result.verdict.value if result is not None and result.verdict else None,
        error_stage=where[0] if where else None,
        nodes=where[1] if where else (),
    )
    check_writable(p)  # before the append: a review is kept with its reports, or not at all
    append_review(p, review)
    if update_reports:
        update_run_reports(p)
    return review


def _check_stage(run_dir: Path, stage: int | None, node: str | None) -> tuple[int, tuple[str, ...]]:
    """(stage, nodes) of a review, checked against the run's DAG (the file it verified, else the
    copy kept in the run directory); `ReviewError` when the DAG has no such stage or node, or
    the node is of another stage."""
    from ..dag import DagValidationError, load_dag
    from .layout import DAG_FILE

    dag_path = load_run_json(run_dir).dag_path
    candidates = [Path(dag_path)] if dag_path else []
    candidates.append(run_dir / DAG_FILE)
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise ReviewError(f"{run_dir}: the run's DAG is not there to check --stage/--node against")
    try:
        dag = load_dag(path)
    except (DagValidationError, OSError) as exc:
        raise ReviewError(f"{path}: cannot read the run's DAG: {redact(str(exc))}") from None
    stages = sorted({n.stage for n in dag})
    if node is not None:
        if node not in dag:
            raise ReviewError(f"the run's DAG ({path}) has no node {node!r}")
        got = dag.stage(node)
        if stage is not None and stage != got:
            raise ReviewError(f"node {node!r} is at stage {got}, not stage {stage}")
        return got, (node,)
    assert stage is not None
    if stage not in stages:
        raise ReviewError(
            f"the run's DAG has no stage {stage} (stages {stages[0]} to {stages[-1]})"
        )
    return stage, ()


def check_writable(run_dir: Path) -> None:
    """Refuse (`ReviewError`, exit 2), before anything is written, a run directory a review
    cannot be completed in: reviews.jsonl a symbolic link or not a regular file, a report that
    is not a regular file, or a directory where no file can be created (the reports are
    replaced through temporary files beside them). Tried, not guessed from the permission
    bits: `os.access` is wrong for root, ACLs and read-only mounts."""
    log = run_dir / REVIEWS_FILE
    if log.is_symlink():
        raise ReviewError(
            f"{log} is a symbolic link; a review is only appended to the run's own file"
        )
    for name in (REVIEWS_FILE, REPORT_FILE, PARTIAL_REPORT, HTML_REPORT):
        path = run_dir / name
        if path.exists() and not path.is_file():
            raise ReviewError(f"{path} is not a regular file; the review cannot be recorded")
    try:
        fd, probe = tempfile.mkstemp(dir=run_dir, prefix=".veritrail-probe.")
    except OSError as exc:
        raise ReviewError(
            f"{run_dir}: cannot write in the run directory ({exc.strerror or exc}); nothing "
            "was recorded"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    if log.exists() and not os.access(log, os.W_OK):
        raise ReviewError(f"{log}: cannot write it (permission denied); nothing was recorded")


def report_with_reviews(report: Mapping[str, Any], run_dir: str | Path) -> dict[str, Any]:
    """`report` with the effective reviews of `run_dir` in it (`reviews.apply_reviews`): what
    the run layer writes as a run's report, so that a re-run or a resume keeps the reviews."""
    return apply_reviews(report, effective_reviews(read_reviews(run_dir)))


def doc_with_reviews(doc: ReportDoc, run_dir: str | Path) -> ReportDoc:
    """A typed report with the effective reviews of `run_dir` (`reviews.reviewed_doc`)."""
    return reviewed_doc(doc, effective_reviews(read_reviews(run_dir)))


@contextlib.contextmanager
def _unless_running(run_dir: Path) -> Iterator[bool]:
    """Hold the run directory's lock (the run store's `flock` on `.lock`) while the body runs;
    yields False, holding nothing, when a run holds it."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locks to respect
        yield True
        return
    fh: IO[bytes] | None = None
    try:
        fh = (run_dir / LOCK_FILE).open("ab")
    except OSError:
        yield True
        return
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        fh.close()  # closing drops the lock


def update_run_reports(run_dir: str | Path) -> ReportsUpdate:
    """Re-write the run directory's report.json and partial-report.json (those that exist) with
    the run's effective reviews, and render report.html from report.json. Nothing is written
    while a run holds the directory (`ReportsUpdate.busy`)."""
    p = Path(run_dir)
    reviews = effective_reviews(read_reviews(p))
    written: list[Path] = []
    with _unless_running(p) as free:
        if not free:
            return ReportsUpdate((), busy=True)
        for name in (REPORT_FILE, PARTIAL_REPORT):
            path = p / name
            if not path.is_file():
                continue
            try:
                doc = read_report(path)
            except ReportFormatError:
                continue  # not ours to repair; the index and the review still work
            doc = apply_reviews(doc, reviews)
            write_report(doc, path)
            written.append(path)
            if name == REPORT_FILE:
                from ..html import write_html

                written.append(write_html(doc, p / HTML_REPORT))
    return ReportsUpdate(tuple(written), busy=False)


__all__ = [
    "ReportsUpdate",
    "add_review",
    "default_author",
    "doc_with_reviews",
    "now_utc",
    "report_with_reviews",
    "update_run_reports",
]
