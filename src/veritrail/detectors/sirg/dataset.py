"""Labelled SIRG data (JSON Lines), validated at the boundary.

One object per line::

    {"id": "fables-3", "context": "...", "query": "...", "response": "line 1\\nline 2",
     "labels": [0, 1], "group": "Romantic Comedy"}

``labels`` has one 0/1 per non-empty line of the response (1 = hallucinated); every fragment
inside a line takes that line's label. ``label`` (one 0/1 for the whole response) may be given
instead and then applies to every line (a weak fragment label). ``group`` keeps related records
in the same split (the evaluation splits FABLES by book). A response is hallucinated when any of
its lines is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .analysis import DEFAULT_QUERY, Example


class LabelledRecord(BaseModel):
    """One labelled response."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    context: str = Field(min_length=1)
    response: str = Field(min_length=1)
    query: str = Field(default=DEFAULT_QUERY, min_length=1)
    labels: list[int] | None = None
    label: int | None = None
    group: str | None = None

    @model_validator(mode="after")
    def _check_labels(self) -> LabelledRecord:
        if (self.labels is None) == (self.label is None):
            raise ValueError("give exactly one of `labels` (per response line) or `label`")
        vals = self.labels if self.labels is not None else [self.label]
        if any(v not in (0, 1) for v in vals):
            raise ValueError("labels must be 0 (faithful) or 1 (hallucinated)")
        if self.labels is not None and len(self.labels) != len(self._lines()):
            raise ValueError(
                f"{len(self.labels)} labels for {len(self._lines())} non-empty response lines"
            )
        return self

    def _lines(self) -> list[str]:
        return [ln for ln in self.response.split("\n") if ln.strip()]

    @property
    def line_labels(self) -> list[int]:
        """One label per non-empty response line."""
        if self.labels is not None:
            return list(self.labels)
        return [int(self.label or 0)] * len(self._lines())

    @property
    def response_label(self) -> int:
        """1 when any line is hallucinated."""
        return max(self.line_labels)

    def example(self) -> Example:
        """The unlabelled example."""
        return Example(context=self.context, response=self.response, query=self.query)


def load_records(path: str | Path) -> list[LabelledRecord]:
    """Read and validate a JSONL file; errors name the line."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(LabelledRecord.model_validate_json(line))
        except ValueError as e:
            raise ValueError(f"{path}:{n}: {e}") from e
    return out


def write_records(records: Iterable[LabelledRecord], path: str | Path) -> None:
    """Write records as JSONL (unset optional fields omitted)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r.model_dump(exclude_none=True), ensure_ascii=False) + "\n")
