"""The one ending of every run: `veritrail verify`/`check`/`resume`, the API, every job of a local
batch and of a Ray batch finish through `end_run`, so their reports, run.json statuses and exit
codes cannot drift apart.

`end_run` builds the report's `run` block (the gates the run applied included, so a loaded
report's `exit_code` is the run's), the report (with its claims' citation statuses when the run
checks citations, and people's reviews), writes it into the run
directory, sets run.json's status by `run_status`, then calls the run-end hooks (`run.hooks`: the
index of runs among them), which never fail nor hold the run.

Run statuses (run.json's `status`, `run.store.Status`):

- `running`: started and not ended (or killed with no chance to say so: `veritrail resume` goes on);
- `interrupted`: stopped by Ctrl-C or SIGTERM; a partial report is written;
- `complete`: ended, and every claim has a verdict;
- `incomplete`: ended, and some claims have no verdict (an error, a fatal endpoint stop, a task
  that failed for good): exit 3, and the same command (or `veritrail resume`) verifies them again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..citations import attach_citations
from ..records import Termination
from ..report import build_report
from .hooks import RunEnded, call_run_end_hooks
from .store import RunStore, Status

if TYPE_CHECKING:
    from ..method.config import VerifyConfig
    from .spec import Job


@dataclass(frozen=True, slots=True)
class RunEnd:
    """What the caller knows of how the run went (the rest is read from the run store)."""

    started: str
    """ISO time the run started (UTC, seconds)."""
    wall_seconds: float
    resumed_claims: int
    """Claims finished by an earlier run of the same run directory."""
    notes: Sequence[str] = ()
    """The model's plain-language remarks (unknown price, format fallbacks), redacted."""
    fatal: str | None = None
    """The fatal endpoint error that stopped the run's claims, redacted."""
    batch: Mapping[str, Any] | None = None
    """For a job of `veritrail batch`: its id and executor."""


@dataclass(frozen=True, slots=True)
class EndedRun:
    """What `end_run` wrote."""

    report: dict[str, Any]
    report_file: Path
    status: str


def run_status(store: RunStore) -> str:
    """`complete` when every claim of the run has a verdict, else `incomplete`."""
    results = {r.claim.id: r for r in store.results_in_order()}
    for claim in store.claims:
        got = results.get(claim.id)
        if got is None or got.termination is Termination.ERROR or got.verdict is None:
            return Status.INCOMPLETE
    return Status.COMPLETE


def run_block(job: Job, store: RunStore, end: RunEnd) -> dict[str, Any]:
    """The report's `run` block: the same keys for verify, resume, the API and every batch job."""
    info: dict[str, Any] = {
        "started": end.started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(end.wall_seconds, 3),
        "run_dir": str(job.run_dir),
        "resumed_claims": end.resumed_claims,
        # The gate this run applied, so that a loaded report's exit_code is the run's.
        "max_unsupported": job.settings.max_unsupported,
    }
    if job.settings.citations is not None or job.settings.max_miscited is not None:
        # Citation checking (docs/citations.md) and its gate, read back by `outcome.exit_code`.
        info["citations"] = job.settings.citations
        info["max_miscited"] = job.settings.max_miscited
    if end.batch is not None:
        info["batch"] = dict(end.batch)
    if end.notes:
        info["notes"] = sorted(set(end.notes)) if end.batch is not None else list(end.notes)
    ext = store.info.extra.get("extraction_cost")
    if ext:
        info["extraction_cost"] = ext
    if end.fatal is not None:
        info["fatal"] = end.fatal
    return info


def end_run(
    job: Job, store: RunStore, config: VerifyConfig, end: RunEnd, *, model_name: str
) -> EndedRun:
    """Finish a run: its report written into the run directory, its status set, the run-end
    hooks called. The report is returned for the caller's own outputs (`--out`, `--html`)."""
    from ..runs.reviewing import report_with_reviews

    report = build_report(
        store.results_in_order(),
        job.dag,
        model=model_name,
        config=dataclasses.asdict(config),
        run=run_block(job, store, end),
        dag_path=job.dag_path,
    )
    # Each claim's citation status (`--citations`): read from its verdict and evidence, here,
    # so verify, check, resume, the API and every batch job report it alike.
    report = attach_citations(report, job.dag, job.settings.citations)
    # People's reviews of this run's claims (`veritrail review`) stay in its report.
    report = report_with_reviews(report, job.run_dir)
    report_file = store.write_report(report)
    status = run_status(store)
    store.set_status(status)
    call_run_end_hooks(RunEnded(job.run_dir, Path(job.settings.runs_dir), status, report_file))
    return EndedRun(report, report_file, status)


__all__ = ["EndedRun", "RunEnd", "end_run", "run_block", "run_status"]
