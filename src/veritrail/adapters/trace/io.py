"""Reading trace files: format detection and the one-call API `dag_from_trace`."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from .build import MatchSettings, TraceImport, build_dag
from .langfuse import is_langfuse, read_langfuse
from .model import TraceError, TraceSpan
from .otel import is_otlp, is_sdk_span, read_otlp, read_sdk_spans


class TraceFormat(StrEnum):
    """The trace encodings `read_trace` understands."""

    OTLP = "otlp"
    """OTLP JSON (the OpenTelemetry collector's file exporter), OpenInference attributes."""
    OTEL_SDK = "otel-sdk"
    """opentelemetry-sdk ``ReadableSpan.to_json()`` objects, OpenInference attributes."""
    LANGFUSE = "langfuse"
    """Langfuse trace / observations exports."""


def parse_json_values(text: str) -> list[Any]:
    """Every JSON value in `text`: one document, JSON Lines, or objects one after another.

    A top-level list is flattened into its items, so ``[span, span]`` and one span per line read
    the same.
    """
    dec = json.JSONDecoder()
    out: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            value, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            raise TraceError(f"not valid JSON at line {line}: {exc.msg}") from exc
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
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{p}: {exc}") from exc
    values = parse_json_values(text)
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


__all__ = ["TraceFormat", "dag_from_trace", "detect_format", "parse_json_values", "read_trace"]
