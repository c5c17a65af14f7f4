"""Reading traces: format detection, and the one-call APIs `dag_from_trace` (a trace file) and
`dag_from_values` (span JSON already parsed, such as a trace fetched from a server's API)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from ... import textio
from .build import build_dag
from .langfuse import is_langfuse, read_langfuse
from .model import TraceError, TraceSpan
from .otel import is_otlp, is_sdk_span, read_otlp, read_sdk_spans
from .result import TraceImport
from .settings import MatchSettings

_SYNTAX = re.compile(r"not valid JSON: (?P<msg>.*) \((?P<where>line \d+, column \d+)\)$")


class TraceFormat(StrEnum):
    """The trace encodings `read_trace` understands."""

    OTLP = "otlp"
    """OTLP JSON (the OpenTelemetry collector's file exporter), OpenInference attributes."""
    OTEL_SDK = "otel-sdk"
    """opentelemetry-sdk ``ReadableSpan.to_json()`` objects, OpenInference attributes."""
    LANGFUSE = "langfuse"
    """Langfuse trace / observations exports."""


def parse_json_values(text: str, path: str | Path = "<text>") -> list[Any]:
    """Every JSON value in `text`: one document, JSON Lines, or objects one after another.

    A top-level list is flattened into its items, so ``[span, span]`` and one span per line read
    the same. The rules of every input file apply (`veritrail.textio`: nesting at most
    `MAX_DEPTH` levels, no lone surrogate; only ``NaN`` and the infinities are accepted, as
    Python's exporters write them); a failure is a `TraceError` with the reason.
    """
    try:
        # NaN allowed: opentelemetry-sdk's to_json() writes a NaN float attribute as NaN.
        values = textio.parse_json_values(text, path, "trace file", allow_constants=True)
    except textio.InputError as exc:
        # Where first, as the importer has always said it: "not valid JSON at line 3, column 7".
        m = _SYNTAX.match(exc.reason)
        reason = f"not valid JSON at {m['where']}: {m['msg']}" if m else exc.reason
        raise TraceError(reason) from None
    out: list[Any] = []
    for value in values:
        if isinstance(value, list):
            out.extend(value)
        else:
            out.append(value)
    return out


def detect_format(values: list[Any]) -> TraceFormat:
    """Which format these JSON values are in (all must agree)."""
    if not values:
        raise TraceError("the file holds no JSON value")
    kinds: set[TraceFormat] = set()
    for v in values:
        if is_otlp(v):
            kinds.add(TraceFormat.OTLP)
        elif is_sdk_span(v):
            kinds.add(TraceFormat.OTEL_SDK)
        elif is_langfuse(v):
            kinds.add(TraceFormat.LANGFUSE)
        else:
            keys = ", ".join(sorted(v)[:8]) if isinstance(v, dict) else type(v).__name__
            raise TraceError(
                "not a trace this importer knows (OTLP JSON, opentelemetry-sdk span JSON, "
                f"Langfuse export): found a value with {keys}"
            )
    if len(kinds) > 1:
        raise TraceError(f"the file mixes formats: {', '.join(sorted(kinds))}")
    return kinds.pop()


def read_trace(
    path: str | Path, fmt: TraceFormat | str | None = None
) -> tuple[TraceFormat, list[TraceSpan]]:
    """Read a trace file into spans; `fmt` forces the format (else detected)."""
    p = Path(path)
    try:  # UTF-8 with an optional BOM, like every input file (veritrail.textio)
        text = textio.read_input_text(p, "trace file")
    except textio.InputError as exc:
        raise TraceError(exc.reason) from None
    values = parse_json_values(text, p)
    del text  # a large export: let its text go before the spans are built
    return spans_from_values(values, fmt)


def spans_from_values(
    values: list[Any], fmt: TraceFormat | str | None = None
) -> tuple[TraceFormat, list[TraceSpan]]:
    """Parsed JSON values of one format (as `parse_json_values` returns them: OTLP JSON
    objects, opentelemetry-sdk span objects or Langfuse exports) into spans; `fmt` forces the
    format (else detected)."""
    found = TraceFormat(fmt) if fmt else detect_format(values)
    reader = {
        TraceFormat.OTLP: read_otlp,
        TraceFormat.OTEL_SDK: read_sdk_spans,
        TraceFormat.LANGFUSE: read_langfuse,
    }[found]
    return found, reader(values)


def dag_from_trace(
    path: str | Path,
    *,
    fmt: TraceFormat | str | None = None,
    trace_id: str | None = None,
    settings: MatchSettings | None = None,
) -> TraceImport:
    """Read a trace file and build its generation DAG (`TraceImport.dag`).

    Raises `TraceError` with the reason when the file cannot be read or gives no valid DAG.
    """
    found, spans = read_trace(path, fmt)
    return build_dag(spans, trace_id=trace_id, settings=settings, meta={"trace_format": str(found)})


def dag_from_values(
    values: list[Any],
    *,
    fmt: TraceFormat | str | None = None,
    trace_id: str | None = None,
    settings: MatchSettings | None = None,
    meta: Mapping[str, Any] | None = None,
) -> TraceImport:
    """Build the generation DAG of span JSON already parsed (`TraceImport.dag`): the values a
    trace file holds (`parse_json_values`), or spans fetched from a tracing server's API in one
    of those shapes (an OTLP ``resourceSpans`` object, opentelemetry-sdk span objects, a
    Langfuse export). `fmt` forces the format (else detected); `meta` is added to the DAG's
    ``meta`` after ``trace_format`` (where the trace came from, say).

    Raises `TraceError` with the reason when the values are no trace or give no valid DAG.
    """
    found, spans = spans_from_values(values, fmt)
    return build_dag(
        spans,
        trace_id=trace_id,
        settings=settings,
        meta={"trace_format": str(found), **(dict(meta) if meta else {})},
    )


__all__ = [
    "TraceFormat",
    "dag_from_trace",
    "dag_from_values",
    "detect_format",
    "parse_json_values",
    "read_trace",
    "spans_from_values",
]
