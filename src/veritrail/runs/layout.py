"""The files of a run directory, by name (docs/running.md, "Runs are durable").

The run layer's names (`veritrail.run.store`, `veritrail.run.spec`; tests/runs/test_files.py
keeps them equal), written again here because `runs/` never imports the run layer, plus the one
file only `runs/` writes: `reviews.jsonl`.
"""

from __future__ import annotations

RUN_FORMAT = "veritrail-run"
RUN_FILE = "run.json"
CLAIMS_FILE = "claims.json"
RESULTS_FILE = "results.jsonl"
REPORT_FILE = "report.json"
PARTIAL_REPORT = "partial-report.json"
LOCK_FILE = ".lock"
DAG_FILE = "dag.json"
"""Where a run keeps a DAG it was given in memory (`veritrail check`)."""

REVIEWS_FILE = "reviews.jsonl"
"""People's reviews of the run's claims, one JSON object a line, appended (`runs.reviews`); the
run layer never writes, rewrites or deletes it."""

HTML_REPORT = "report.html"
"""The HTML report `veritrail review` re-renders in the run directory."""

INDEX_FILE = "index.sqlite"
"""The default index of a runs directory (`runs.db`)."""

__all__ = [
    "CLAIMS_FILE",
    "DAG_FILE",
    "HTML_REPORT",
    "INDEX_FILE",
    "LOCK_FILE",
    "PARTIAL_REPORT",
    "REPORT_FILE",
    "RESULTS_FILE",
    "REVIEWS_FILE",
    "RUN_FILE",
    "RUN_FORMAT",
]
