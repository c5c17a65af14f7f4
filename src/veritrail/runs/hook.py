"""The runs index's run-end hook (`run.hooks`): record an ended run in the index.

Kept apart from `runs.index` so that deciding whether there is anything to do imports no
SQLAlchemy: a run whose runs directory has no index yet, and no index database configured,
creates none (the first `veritrail runs` builds the index from the run directories anyway).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .. import environment
from .layout import INDEX_FILE

DB_VARIABLE = "VERITRAIL_RUNS_DB"  # runs.db's, repeated: importing runs.db imports SQLAlchemy


class EndedRun(Protocol):
    """What this hook reads of `run.hooks.RunEnded` (runs/ never imports run/)."""

    @property
    def run_dir(self) -> Path: ...

    @property
    def runs_dir(self) -> Path: ...


def record_ended_run(event: EndedRun) -> None:
    """Record `event.run_dir` in the index of `event.runs_dir` when that index exists or a
    database is configured (`VERITRAIL_RUNS_DB`); raises what the index raises (the hook runner
    turns it into one warning)."""
    root = event.runs_dir
    configured = bool(environment.get(DB_VARIABLE)) or (root / INDEX_FILE).is_file()
    if not configured or not root.is_dir():
        return
    from .index import open_index

    with open_index(root) as index:
        index.record_run(event.run_dir)


__all__ = ["record_ended_run"]
