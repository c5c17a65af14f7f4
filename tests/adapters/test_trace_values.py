"""The trace importer's entry points besides a file: `dag_from_values` (span JSON already parsed,
as a tracing server's API gives it) builds the DAG `dag_from_trace` builds from the same spans in
a file, and the names other code imports from `veritrail.adapters.trace.build` stay there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from veritrail.adapters.trace import (
    MatchSettings,
    TraceError,
    build_dag,
    dag_from_trace,
    dag_from_values,
    matching,
)
from veritrail.adapters.trace import build as trace_build
from veritrail.adapters.trace.io import spans_from_values

QUESTION = "Which river runs through the old town of Corvin?"
DOC = "The Wend river runs through the old town of Corvin. Its bridge opened in 1921."
SUMMARY = "The Wend river runs through Corvin, whose bridge opened in 1921."
ANSWER = "The Wend runs through the old town of Corvin."


def _span(sid: str, parent: str, kind: str, t0: int, t1: int, **attrs: str) -> dict[str, Any]:
    values = [{"key": "openinference.span.kind", "value": {"stringValue": kind}}]
    values += [{"key": k.replace("_", "."), "value": {"stringValue": v}} for k, v in attrs.items()]
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": sid.encode().hex().rjust(16, "0"),
        "parentSpanId": parent and parent.encode().hex().rjust(16, "0"),
        "name": sid,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + t0 * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + t1 * 1_000_000),
        "attributes": values,
    }


def _otlp() -> dict[str, Any]:
    """A retrieve → summarise → answer trace as OTLP JSON (OpenInference attributes)."""
    spans = [
        _span("root", "", "CHAIN", 0, 9, input_value=QUESTION, output_value=ANSWER),
        _span("ret", "root", "RETRIEVER", 1, 2, input_value=QUESTION),
        _span("sum", "root", "LLM", 3, 4, input_value=f"Summarise: {DOC}", output_value=SUMMARY),
        _span(
            "ans", "root", "LLM", 5, 6, input_value=f"{SUMMARY}\n{QUESTION}", output_value=ANSWER
        ),
    ]
    spans[1]["attributes"].append(
        {"key": "retrieval.documents.0.document.content", "value": {"stringValue": DOC}}
    )
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def test_values_give_the_dag_of_the_same_spans_in_a_file(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_otlp()), encoding="utf-8")
    from_file = dag_from_trace(trace)
    from_values = dag_from_values([_otlp()], meta={"source_url": "http://127.0.0.1/v1/spans"})
    assert from_values.dag.to_records() == from_file.dag.to_records()
    assert [r["id"] for r in from_values.dag.to_records()] == ["input-1", "doc-1", "gen-1", "gen-2"]
    assert from_values.dag.terminal == "gen-2"
    assert from_values.links == from_file.links
    assert from_values.dag.meta == {**from_file.dag.meta, "source_url": "http://127.0.0.1/v1/spans"}
    assert from_values.dag.meta["trace_format"] == "otlp"
    # The same spans read into records first: build_dag, the step below both.
    _, spans = spans_from_values([_otlp()])
    assert build_dag(spans).dag.to_records() == from_file.dag.to_records()


def test_values_take_the_settings_and_a_forced_format() -> None:
    strict = dag_from_values([_otlp()], fmt="otlp", settings=MatchSettings(fuzzy=False))
    assert strict.dag.meta["matching"]["fuzzy"] == "off"
    with pytest.raises(TraceError, match="no JSON value"):
        dag_from_values([])
    with pytest.raises(TraceError, match="not a trace this importer knows"):
        dag_from_values([{"spans": "none"}])
    with pytest.raises(TraceError, match="no trace 'abc'"):
        dag_from_values([_otlp()], trace_id="abc")


def test_names_imported_from_build_stay_there() -> None:
    """Other code imports these from `build` (the integrations, the benchmark, the tests)."""
    for name in (
        "DEFAULT_THRESHOLD",
        "STATS",
        "Ambiguity",
        "Link",
        "MatchSettings",
        "SpanNote",
        "TraceImport",
        "build_dag",
        "check_parents",
        "normalize",
        "select_trace",
    ):
        assert hasattr(trace_build, name), name
    # One counter dict: clearing it through `build` (as the benchmark does) clears the matcher's.
    assert trace_build.STATS is matching.STATS
