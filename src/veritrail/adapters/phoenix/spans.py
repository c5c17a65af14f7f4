"""Traces in Phoenix → generation DAG, by the rules of the trace-file import.

Phoenix's span JSON (`GET /v1/projects/{p}/spans`) is the opentelemetry-sdk ``to_json()`` shape
(``context.span_id``, ``parent_id``, ISO times, flat ``attributes``) except that the
OpenInference kind sits in ``span_kind`` instead of the ``openinference.span.kind`` attribute.
`sdk_span` puts it back, and the spans then go through `veritrail.adapters.trace.dag_from_values`
as an ``otel-sdk`` trace: one importer, so a trace gives the same DAG whether it was exported to a
file or read from Phoenix. The DAG's ``meta`` keeps the trace id (``trace_id``), every node's
span ids (``original_spans``) and where it came from (``phoenix``: server URL without
credentials, project).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ...errors import InputProblem
from ..trace import MatchSettings, TraceError, TraceImport, dag_from_values
from .client import PhoenixClient

_KINDLESS = frozenset({"", "UNKNOWN"})


def sdk_span(span: Mapping[str, Any]) -> dict[str, Any]:
    """One Phoenix span as an opentelemetry-sdk span object, its kind back among the
    attributes (a span Phoenix calls UNKNOWN keeps none, so the GenAI conventions still apply)."""
    attrs = dict(span.get("attributes") or {})
    kind = str(span.get("span_kind") or "").upper()
    if kind not in _KINDLESS:
        attrs.setdefault("openinference.span.kind", kind)
    return {
        "name": span.get("name") or "",
        "context": dict(span.get("context") or {}),
        "parent_id": span.get("parent_id"),
        "start_time": span.get("start_time"),
        "end_time": span.get("end_time"),
        "attributes": attrs,
    }


def parse_time(text: str) -> str:
    """`text` (ISO 8601; a date alone is midnight UTC; no zone = UTC) as an ISO timestamp with a
    zone, the form Phoenix's `start_time` filters take; `InputProblem` when unreadable."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputProblem(
            f"not a time: {text!r} (use ISO 8601, e.g. 2026-11-26T09:30:00Z or 2026-11-26)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.isoformat()


def group_by_trace(spans: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Spans by trace id, each trace's spans in the order given (oldest first from Phoenix)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        tid = str((s.get("context") or {}).get("trace_id") or "")
        out.setdefault(tid, []).append(sdk_span(s))
    return out


def trace_import(
    spans: list[dict[str, Any]],
    *,
    trace_id: str | None,
    project: str,
    url: str,
    settings: MatchSettings | None = None,
) -> TraceImport:
    """The DAG of spans already fetched (sdk-shaped, `sdk_span`); `TraceError` with the reason
    when they give none (no LLM generation, a final output no generation leads to, ...)."""
    return dag_from_values(
        spans,
        fmt="otel-sdk",
        trace_id=trace_id,
        settings=settings,
        meta={"phoenix": {"url": url, "project": project}},
    )


def dag_from_phoenix(
    client: PhoenixClient,
    project: str,
    *,
    trace_id: str | None = None,
    since: str | None = None,
    settings: MatchSettings | None = None,
) -> TraceImport:
    """Read a trace's spans from Phoenix and build its DAG (`veritrail from-trace --phoenix`).

    `trace_id` names the trace; otherwise the spans started at or after `since` (ISO 8601; all
    when None) are read and, as for a trace file, the one trace among them with LLM spans is
    taken (several: `TraceError` listing them, pick one with `trace_id`). Raises
    `UnknownProject`, `PhoenixAuthError`, `PhoenixUnreachable` or `TraceError`.
    """
    client.project(project)  # an unknown project is named as such, not as "no spans"
    if trace_id is not None:
        tid = trace_id.strip().lower().removeprefix("0x")
        spans = [sdk_span(s) for s in client.spans(project, trace_ids=[tid])]
        if not spans:
            raise TraceError(f"no trace {trace_id!r} in Phoenix project {project!r}")
        return trace_import(spans, trace_id=tid, project=project, url=client.url, settings=settings)
    start = parse_time(since) if since else None
    # Whole traces that started since then (a span filter would cut older traces in half).
    ids = [str(t.get("trace_id")) for t in client.traces(project, start_time=start)]
    if not ids:
        when = f" started since {start}" if start else ""
        raise TraceError(f"no trace{when} in Phoenix project {project!r}")
    spans = []
    for i in range(0, len(ids), 50):
        spans += [sdk_span(s) for s in client.spans(project, trace_ids=ids[i : i + 50])]
    return trace_import(spans, trace_id=None, project=project, url=client.url, settings=settings)


__all__ = ["dag_from_phoenix", "group_by_trace", "parse_time", "sdk_span", "trace_import"]
