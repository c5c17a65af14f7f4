"""Traces of a pipeline as it already runs → generation DAG (docs/adapters.md, "Traces").

Reads OpenTelemetry spans that follow the OpenInference conventions (OTLP JSON as the collector's
file exporter writes it, or opentelemetry-sdk ``span.to_json()`` objects) and Langfuse exports,
and builds the DAG from the texts: roots are what entered the trace from outside, nodes are LLM
generations, edges are found by containment, then sentence-level fuzzy matching.

    from veritrail.adapters.trace import dag_from_trace
    result = dag_from_trace("trace.json")
    save_dag(result.dag, "dag.json")

Spans already parsed (a trace fetched from a tracing server, say) go through
`dag_from_values(values)`; spans already read into `TraceSpan` values through `build_dag(spans)`.
"""

from .build import build_dag
from .io import (
    TraceFormat,
    dag_from_trace,
    dag_from_values,
    detect_format,
    parse_json_values,
    read_trace,
)
from .model import Kind, TraceError, TraceSpan, text_leaves
from .result import Ambiguity, Link, SpanNote, TraceImport
from .settings import DEFAULT_THRESHOLD, MatchSettings
from .text import normalize

__all__ = [
    "DEFAULT_THRESHOLD",
    "Ambiguity",
    "Kind",
    "Link",
    "MatchSettings",
    "SpanNote",
    "TraceError",
    "TraceFormat",
    "TraceImport",
    "TraceSpan",
    "build_dag",
    "dag_from_trace",
    "dag_from_values",
    "detect_format",
    "normalize",
    "parse_json_values",
    "read_trace",
    "text_leaves",
]
