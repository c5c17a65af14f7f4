"""`Report`: the result of `veritrail.verify` / `veritrail.check`, and of `veritrail.load_report`.

A thin, read-only view over the versioned report document (`veritrail.report`, format
`veritrail-report`): the claims as `ClaimResult` records, a summary, the unsupported and errored
claims, the exit status the CLI would give, and the report's outputs (JSON, HTML, a pandas
table). It is also a `Mapping` over the document, so code written for the dict that
`load_report` used to return (`report["summary"]`) keeps working; `to_dict()` gives a copy of it.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .outcome import ExitCode, exit_code
from .records import ClaimResult, Verdict

if TYPE_CHECKING:
    from .report_model import ReportDoc

TABLE_COLUMNS = (
    "id",
    "text",
    "verdict",
    "termination",
    "error_stages",
    "provenance_paths",
    "lm_calls",
    "input_tokens",
    "output_tokens",
    "dollars",
    "error",
)
"""The columns of `Report.to_pandas()` (and of `Report.rows()`), in order."""


@dataclass(frozen=True, slots=True)
class ReportSummary:
    """Run totals of a report."""

    claims: int
    verdicts: dict[str, int]
    """Claims per final verdict (`Fully Supported`, `Not Fully Supported`, `Inconclusive`) and
    `error` for claims that could not be verified."""
    unsupported: int
    """Claims judged Not Fully Supported."""
    unsupported_share: float
    """`unsupported / claims` (0.0 with no claims): what `max_unsupported` is compared with."""
    errors: int
    terminations: dict[str, int]
    error_stages: dict[int, int]
    """Pipeline stage -> claims whose unsupported content entered there."""
    cost: dict[str, Any] = field(default_factory=dict)
    """Model calls, cached calls, tokens in and out, dollars (extraction not included; see the
    report's `run.extraction_cost`)."""

    def __str__(self) -> str:
        v = self.verdicts
        parts = [f"{n} {k}" for k, n in v.items() if n]
        return (
            f"{self.claims} claims: "
            + (", ".join(parts) or "none")
            + f"; {100 * self.unsupported_share:.1f}% unsupported"
        )


class Report(Mapping[str, Any]):
    """A verification report. Build with `veritrail.verify`, `veritrail.check` or
    `veritrail.load_report`; never edited in place.

    `max_unsupported` is the gate that `exit_code` applies: the run's own setting (for a loaded
    report, the one its `run.max_unsupported` recorded; None, no gate, when it recorded none).
    """

    __slots__ = ("_claims", "_doc", "_typed", "max_unsupported", "path")

    def __init__(
        self,
        doc: Mapping[str, Any],
        *,
        max_unsupported: float | None = None,
        path: str | Path | None = None,
    ) -> None:
        self._doc: dict[str, Any] = dict(doc)
        self._typed: ReportDoc | None = None
        self._claims: list[ClaimResult] | None = None
        self.max_unsupported = max_unsupported
        self.path: Path | None = Path(path) if path is not None else None
        """The file the report was loaded from or last saved to."""

    # -- Mapping over the document ------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self._doc[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._doc)

    def __len__(self) -> int:
        return len(self._doc)

    def __repr__(self) -> str:
        return f"<Report {self.summary}; exit_code {int(self.exit_code)}>"

    # -- views --------------------------------------------------------------------------------
    @property
    def doc(self) -> ReportDoc:
        """The report as its typed model (`veritrail.report_model.ReportDoc`), validated on first
        use (`ReportContractError` naming the first wrong field), an older version migrated."""
        if self._typed is None:
            from .report import as_report

            self._typed = as_report(self._doc)
        return self._typed

    @property
    def claims(self) -> list[ClaimResult]:
        """Every claim's result, in the order of the input claims."""
        if self._claims is None:
            from .report import claim_from_doc

            self._claims = [claim_from_doc(c) for c in self.doc.claims]
        return list(self._claims)

    @property
    def unsupported(self) -> list[ClaimResult]:
        """The claims judged Not Fully Supported."""
        return [r for r in self.claims if r.verdict is Verdict.NOT_FULLY_SUPPORTED]

    @property
    def inconclusive(self) -> list[ClaimResult]:
        """The claims judged Inconclusive."""
        return [r for r in self.claims if r.verdict is Verdict.INCONCLUSIVE]

    @property
    def errors(self) -> list[ClaimResult]:
        """The claims that could not be verified (no verdict; `error` says why). Running the same
        job again (or `veritrail resume RUN_DIR`) verifies them again."""
        return [r for r in self.claims if r.verdict is None]

    @property
    def summary(self) -> ReportSummary:
        """Counts per verdict, the unsupported share, error stages and cost."""
        s = self.doc.summary
        verdicts = dict(s.verdicts)
        n = s.claims
        nfs = s.count(Verdict.NOT_FULLY_SUPPORTED)
        return ReportSummary(
            claims=n,
            verdicts=verdicts,
            unsupported=nfs,
            unsupported_share=nfs / n if n else 0.0,
            errors=s.errors,
            terminations=dict(s.terminations),
            error_stages=s.stage_counts,
            cost=s.cost.model_dump(exclude_unset=True),
        )

    @property
    def exit_code(self) -> ExitCode:
        """The exit status `veritrail verify` gives for this report: 3 when a claim could not be
        verified, else 1 when the share of Not Fully Supported claims is above
        `max_unsupported`, else 0."""
        return exit_code(self.doc, self.max_unsupported)

    @property
    def ok(self) -> bool:
        """True when `exit_code` is 0."""
        return self.exit_code is ExitCode.OK

    @property
    def run_dir(self) -> Path | None:
        """The run directory that holds this run (None when the run kept none)."""
        d = self.doc.run.run_dir
        return Path(d) if d else None

    # -- outputs ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the report document (the JSON `save` writes, before redaction)."""
        return copy.deepcopy(self._doc)

    def save(self, path: str | Path) -> Path:
        """Write the JSON report to `path` (atomically, every string redacted); returns it."""
        from .report import write_report

        write_report(self._doc, path)
        self.path = Path(path)
        return self.path

    def write_html(self, path: str | Path) -> Path:
        """Write the self-contained HTML trail viewer (docs/report.md) to `path`; returns it."""
        from .html import write_html

        return write_html(self._doc, path)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per claim with the `TABLE_COLUMNS` (what `to_pandas` tabulates)."""
        return [
            {
                "id": c.id,
                "text": c.text,
                "verdict": c.verdict.value if c.verdict is not None else None,
                "termination": c.termination.value,
                "error_stages": list(c.error_stages),
                "provenance_paths": len(c.provenance),
                "lm_calls": c.cost.lm_calls,
                "input_tokens": c.cost.input_tokens,
                "output_tokens": c.cost.output_tokens,
                "dollars": c.cost.dollars if c.cost.dollars is not None else 0.0,
                "error": c.error,
            }
            for c in self.doc.claims
        ]

    def to_pandas(self) -> Any:
        """A `pandas.DataFrame`, one row per claim (`TABLE_COLUMNS`). pandas is optional: the
        `pandas` extra (`pip install 'veritrail[pandas]'`)."""
        try:
            pd = importlib.import_module("pandas")
        except ImportError:
            raise ImportError(
                "Report.to_pandas() needs pandas, which is not installed: "
                "pip install 'veritrail[pandas]' (or pip install pandas; Report.rows() gives the "
                "same table as a list of dicts)"
            ) from None
        return pd.DataFrame(self.rows(), columns=list(TABLE_COLUMNS))


def load_report(path: str | Path, *, max_unsupported: float | None = None) -> Report:
    """Read a saved report (format and version checked: `ReportFormatError`) as a `Report`.

    `max_unsupported` sets the gate `Report.exit_code` applies. None (the default) takes the gate
    of the run that wrote the report, recorded as `run.max_unsupported`; a report that records
    none (no gate was set, or written by a version before it was recorded) gets no gate. Pass
    `1.0` to apply no gate to a report that recorded one."""
    from .report import as_report, read_report

    doc = read_report(path)
    typed = as_report(doc, source=path)  # validated once, here
    if max_unsupported is None:
        max_unsupported = typed.run.max_unsupported
    report = Report(doc, max_unsupported=max_unsupported, path=path)
    report._typed = typed
    return report
