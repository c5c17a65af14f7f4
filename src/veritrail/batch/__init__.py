"""Batch verification: many jobs (DAG + claims) from a JSON Lines manifest, run by the local
executor (one process, one event loop) or on a Ray cluster. See docs/scale.md.

Python use::

    from veritrail.batch import LocalExecutor, load_manifest, prepare_jobs, run_batch

    entries = load_manifest("manifest.jsonl")
    jobs = prepare_jobs(Path("manifest.jsonl"), entries, flags={}, config_path=None, html=False)
    result = run_batch(jobs, LocalExecutor(concurrency=64), manifest="manifest.jsonl",
                       summary_dir=Path("."), concurrency=64)
"""

from __future__ import annotations

from .driver import BatchResult, Executor, open_states, run_batch
from .jobs import (
    BatchInputError,
    ExtractionFailed,
    JobState,
    prepare_jobs,
)
from .local import LocalExecutor
from .manifest import BATCH_ONLY_SETTINGS, ManifestError, ManifestJob, load_manifest
from .progress import BatchEvents, make_batch_progress
from .ray_cluster import RayUnavailableError, RayUnreachableError
from .ray_executor import RayExecutor
from .summary import JobOutcome

__all__ = [
    "BATCH_ONLY_SETTINGS",
    "BatchEvents",
    "BatchInputError",
    "BatchResult",
    "Executor",
    "ExtractionFailed",
    "JobOutcome",
    "JobState",
    "LocalExecutor",
    "ManifestError",
    "ManifestJob",
    "RayExecutor",
    "RayUnavailableError",
    "RayUnreachableError",
    "load_manifest",
    "make_batch_progress",
    "open_states",
    "prepare_jobs",
    "run_batch",
]
