"""Many runs, one index: the run directories listed, filtered and reviewed (docs/runs.md).

The run directories stay the source of truth; the index is a cache of what they hold, in a real
database (SQLite at ``<runs_dir>/index.sqlite`` by default, PostgreSQL with
``postgresql://...``), created and migrated (Alembic) on first use, refreshed incrementally (only
the run directories whose files changed since they were indexed) and rebuildable at any time.

The public API (stable: ``veritrail diff`` and ``veritrail view`` are built on it)::

    from veritrail.runs import open_index, RunFilter

    with open_index("runs") as index:          # db_url=None: $VERITRAIL_RUNS_DB, else SQLite
        index.refresh()                         # cheap: re-reads changed run directories only
        for run in index.list_runs(RunFilter(dag="summary", since=...)):   # newest first
            run.id, run.dag, run.model, run.created, run.unsupported_share, run.reviewed
        run = index.get_run("summary-1a2b3c4d5e6f")                      # RunRow | None
        for claim in index.run_claims(run.id):                          # report order
            claim.claim_id, claim.key, claim.verdict, claim.review_verdict, claim.error_stages
        index.review(run.id, "c3", "Not Fully Supported", "the date is wrong", author="ana")
        index.record_run(path)                  # index one run directory now
        index.reindex()                         # rebuild everything from the files

* `open_index(runs_dir, db_url=None) -> RunIndex` (`index`): `RunIndex.refresh`, `reindex`,
  `record_run`, `list_runs(RunFilter, limit=, offset=)`, `count_runs`, `get_run`, `run_claims`,
  `review`, `dags`, `models`; its records (`rows`): `RunRow`, `ClaimRow`, `RunFilter`,
  `RefreshStats`.
  `index_finished_run(run_dir, runs_dir)`: the best-effort call the run layer makes when a run
  ends (never raises).
* Reviews, no database needed: the file format (`reviews`: `read_reviews`, `effective_reviews`,
  `apply_reviews`, `parse_verdict`, `Review`, `ClaimReview`, `REVIEWS_FILE`: ``reviews.jsonl``
  in the run directory, append-only, the latest review of a claim is its effective one) and
  reviewing a run (`reviewing`: `add_review`, `update_run_reports`, `report_with_reviews`, the
  call the run layer makes on a report before writing it into a run directory).
* Run directories (`files`): `find_run_dirs`, `read_run_dir` (a `RunRecord` with its
  `ClaimRecord`s), `is_run_dir`; their file names (`layout`).
* Claim keys (`keys`): `normalize_claim_text`, `claim_text_key` (the key of a claim's
  normalised text), `claim_sources` (the root nodes its provenance reaches).
* The database (`db`: engines, URLs and migrations; `schema`: the tables; `migrations/`: the
  Alembic scripts shipped in the package).

`runs/` never imports `run/` or `batch/` (`veritrail eval` reads reviews through it, and eval
never imports the run layer); it reads the files the run layer writes.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    # The index needs SQLAlchemy; the reviews and the run-directory readers do not, and
    # `veritrail eval` imports them: each name loads its module on first use.
    "RunIndex": "index",
    "RunFilter": "rows",
    "RunRow": "rows",
    "ClaimRow": "rows",
    "RefreshStats": "rows",
    "open_index": "index",
    "index_finished_run": "index",
    "RunsIndexError": "index",
    "Review": "reviews",
    "ClaimReview": "reviews",
    "ReviewError": "reviews",
    "REVIEWS_FILE": "reviews",
    "add_review": "reviewing",
    "read_reviews": "reviews",
    "effective_reviews": "reviews",
    "apply_reviews": "reviews",
    "report_with_reviews": "reviewing",
    "update_run_reports": "reviewing",
    "parse_verdict": "reviews",
    "RunRecord": "files",
    "ClaimRecord": "files",
    "find_run_dirs": "files",
    "read_run_dir": "files",
    "is_run_dir": "files",
    "normalize_claim_text": "keys",
    "claim_text_key": "keys",
    "claim_sources": "keys",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'veritrail.runs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)


__all__ = sorted(_LAZY)
