"""CI outputs of the gate: JUnit XML, SARIF 2.1.0 and GitHub Actions annotations from reports
(verify, check, each job of a batch) or a diff document (`veritrail diff`).

Reads reports only, through their typed model (`report.as_report`: a dict or a `ReportDoc`;
layer 4, beside `report`): it never imports `run/` or `batch/`; the
commands check the output paths before any model call and call `write_ci_outputs` at the end.
See docs/running.md, "CI outputs".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..textio import atomic_write_text
from .findings import (
    Finding,
    GateInput,
    Kind,
    diff_input,
    incomplete_input,
    report_findings,
    report_input,
)
from .github import escape_data, escape_property, github_annotations
from .junit import junit_xml, xml_safe
from .sarif import sarif_json, sarif_log

ANNOTATION_FORMATS = ("github",)


@dataclass(frozen=True, slots=True)
class CiTargets:
    """Which CI outputs a command was asked for."""

    junit: Path | None = None
    sarif: Path | None = None
    annotations: str | None = None
    """The annotation format: "github", or None."""

    def files(self) -> list[tuple[str, Path]]:
        """(flag, path) of the files to write, for the commands' output checks."""
        pairs = (("--junit", self.junit), ("--sarif", self.sarif))
        return [(flag, p) for flag, p in pairs if p is not None]

    @property
    def any(self) -> bool:
        """True when some CI output was asked for."""
        return bool(self.files()) or self.annotations is not None


def write_ci_outputs(targets: CiTargets, inputs: Sequence[GateInput]) -> list[str]:
    """Write the JUnit and SARIF files (atomically; their text comes from redacted findings)
    and return the annotation lines to print (empty without `--annotations`)."""
    if targets.junit is not None:
        atomic_write_text(targets.junit, junit_xml(inputs))
    if targets.sarif is not None:
        atomic_write_text(targets.sarif, sarif_json(inputs))
    return github_annotations(inputs) if targets.annotations == "github" else []


__all__ = [
    "ANNOTATION_FORMATS",
    "CiTargets",
    "Finding",
    "GateInput",
    "Kind",
    "diff_input",
    "escape_data",
    "escape_property",
    "github_annotations",
    "incomplete_input",
    "junit_xml",
    "report_findings",
    "report_input",
    "sarif_json",
    "sarif_log",
    "write_ci_outputs",
    "xml_safe",
]
