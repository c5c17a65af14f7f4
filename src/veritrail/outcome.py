"""What a report means for the caller: the exit status and the `--max-unsupported` gate.

The policy lives beside the report it reads (`report.py`, `results.py`): `veritrail verify`,
`resume`, `check`, every job of `veritrail batch`, the Python API's `Report.exit_code` and the
end-of-run printout (`run.summary`) all decide with these functions, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report import ReportSource


class ExitCode(IntEnum):
    """Exit status of every command that verifies (README "Exit codes"); also
    `veritrail.Report.exit_code`."""

    OK = 0
    """Every claim verified and no gate failed."""
    GATE = 1
    """A gate failed (`--max-unsupported`, `--max-miscited`)."""
    USAGE = 2
    """Bad input or usage, decided before any model call."""
    ERRORS = 3
    """One or more claims could not be verified (wins over GATE)."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM."""


def gate_exceeded(unsupported: int, total: int, max_unsupported: float | None) -> bool:
    """The `--max-unsupported` rule: True when `unsupported` of `total` claims (errored ones
    included) is a share above `max_unsupported` (never with no gate or no claims)."""
    if max_unsupported is None or not total:
        return False
    return unsupported / total > max_unsupported


def exit_status(*, errors: bool, gate_failed: bool) -> ExitCode:
    """3 when a claim could not be verified (wins), else 1 when a gate failed, else 0."""
    if errors:
        return ExitCode.ERRORS
    if gate_failed:
        return ExitCode.GATE
    return ExitCode.OK


@dataclass(frozen=True, slots=True)
class GateResult:
    """A failed `--max-unsupported` gate."""

    rate: float
    """The allowed share."""
    share: float
    """The share of claims judged Not Fully Supported."""
    claims: tuple[tuple[str, str], ...]
    """(id, text) of those claims."""
    total: int


def gate_failures(report: ReportSource, max_unsupported: float | None) -> GateResult | None:
    """The `--max-unsupported` gate: a `GateResult` when the share of the report's claims whose
    final verdict is Not Fully Supported is above `max_unsupported`, else None (also with no
    gate or no claims). The share is over every claim of the report, errored ones included."""
    if max_unsupported is None:
        return None
    from .report import as_report  # the report's readers sit in this layer; imported on use

    claims = as_report(report).claims
    nfs = tuple((c.id, c.text) for c in claims if c.unsupported)
    if not gate_exceeded(len(nfs), len(claims), max_unsupported):
        return None
    return GateResult(max_unsupported, len(nfs) / len(claims), nfs, len(claims))


def exit_code(report: ReportSource, max_unsupported: float | None) -> ExitCode:
    """The run's exit status from its report: 3 when a claim ended in error (wins), else 1 when
    the share of Not Fully Supported claims is above `max_unsupported` or the report's own
    `--max-miscited` gate (`run.max_miscited`, `citations.miscited_gate`) failed, else 0."""
    from .citations import miscited_gate
    from .report import as_report

    doc = as_report(report)
    return exit_status(
        errors=bool(doc.summary.errors),
        gate_failed=gate_failures(doc, max_unsupported) is not None
        or miscited_gate(doc) is not None,
    )
