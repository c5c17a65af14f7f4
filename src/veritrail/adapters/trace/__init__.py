"""Traces of a pipeline as it already runs → generation DAG (docs/adapters.md, "Traces").

Reads OpenTelemetry spans that follow the OpenInference conventions (OTLP JSON as the collector's
file exporter writes it, or opentelemetry-sdk ``span.to_json()`` objects) and Langfuse exports,
and builds the DAG from the texts: roots are what entered the trace from outside, nodes are LLM
generations, edges are found by containment, then sentence-level fuzzy matching.

    from veritrail.adapters.trace import dag_from_trace
    result = dag_from_trace("trace.json")
    save_dag(result.dag, "dag.json")
"""

from .build import (
    DEFAULT_THRESHOLD,
    Ambiguity,
    Link,
    MatchSettings,
    SpanNote,
    TraceImport,
    build_dag,
    normalize,
)
from .io import TraceFormat, dag_from_trace, detect_format, parse_json_values, read_trace
from .model import Kind, TraceError, TraceSpan, text_leaves

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
    "detect_format",
    "normalize",
    "parse_json_values",
    "read_trace",
    "text_leaves",
]
