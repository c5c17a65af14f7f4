"""A run's outputs: the JSON report (`--out`) and the HTML report (`--html`); the exit status
they lead to is `veritrail.outcome`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..report import atomic_write_text, write_report
from .spec import Job

if TYPE_CHECKING:
    pass


def write_outputs(job: Job, report: Mapping[str, Any], *, written: Path | None = None) -> None:
    """Write the job's JSON report (`--out`) and HTML report (`--html`), when it has them.

    `written`: a file already holding exactly `report` as `write_report` writes it (the run
    directory's copy, `RunState.report_file`, when the report was not changed since): its bytes
    are copied rather than the report encoded a second time (indented JSON goes through Python's
    pure-Python encoder: seconds for a long trail's report)."""
    if job.out_path is not None:
        if written is not None and written.is_file():
            atomic_write_text(job.out_path, written.read_text(encoding="utf-8"))
        else:
            write_report(report, job.out_path)
    if job.html_path is not None:
        from ..html import write_html

        write_html(report, job.html_path)
