"""Langfuse exports (fixture written from Langfuse's documented trace/observation schema),
format detection, and the traces the importer must reject (exit 2 with the reason)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from trace_verify import provenance_roots, verify_dag

from veritrail.adapters.trace import (
    Kind,
    MatchSettings,
    TraceError,
    TraceSpan,
    build_dag,
    dag_from_trace,
    text_leaves,
)
from veritrail.cli.main import cli
from veritrail.dag import load_dag

CONTEXT = [
    "Mount Oro is 2,310 metres high. Its summit hut opens in June.",
    "The Oro cable car was built in 1974. It runs every twenty minutes in summer.",
]
QUESTION = "When can I reach the summit of Mount Oro?"
ANSWER = "The summit hut opens in June, and the cable car runs every twenty minutes in summer."


def langfuse_trace(trace_id: str = "t-1") -> dict[str, Any]:
    """A RAG run as Langfuse's GET /api/public/traces/{id} returns it (TraceWithFullDetails)."""

    def obs(
        i: str, type_: str, name: str, t0: int, t1: int, parent: str | None, **kw: Any
    ) -> dict[str, Any]:
        return {
            "id": i,
            "traceId": trace_id,
            "type": type_,
            "name": name,
            "startTime": f"2025-05-01T10:00:{t0:02d}.000Z",
            "endTime": f"2025-05-01T10:00:{t1:02d}.000Z",
            "parentObservationId": parent,
            "level": "DEFAULT",
            "metadata": {},
            **kw,
        }

    return {
        "id": trace_id,
        "name": "rag",
        "timestamp": "2025-05-01T10:00:00.000Z",
        "input": {"question": QUESTION},
        "output": ANSWER,
        "observations": [
            obs("o1", "SPAN", "pipeline", 0, 9, None, input={"question": QUESTION}, output=ANSWER),
            obs(
                "o2",
                "RETRIEVER",
                "search",
                1,
                2,
                "o1",
                input=QUESTION,
                output=[
                    {"page_content": c, "metadata": {"source": f"doc{i}"}}
                    for i, c in enumerate(CONTEXT)
                ],
            ),
            obs("o3", "EMBEDDING", "embed", 1, 1, "o2", input=QUESTION, output=None),
            obs(
                "o4",
                "GENERATION",
                "answer",
                3,
                8,
                "o1",
                model="gpt-4o-mini",
                input=[
                    {
                        "role": "system",
                        "content": "Answer from this context only:\n\n" + "\n\n".join(CONTEXT),
                    },
                    {"role": "user", "content": QUESTION},
                ],
                output={"role": "assistant", "content": ANSWER},
                usage={"input": 80, "output": 20, "unit": "TOKENS"},
            ),
        ],
    }


def test_langfuse_trace_export(tmp_path: Path) -> None:
    f = tmp_path / "langfuse.json"
    f.write_text(json.dumps(langfuse_trace()), encoding="utf-8")
    res = dag_from_trace(f)
    dag = res.dag
    assert dag.meta["trace_format"] == "langfuse"
    assert {dag.node(r).text for r in dag.roots} == {QUESTION, *CONTEXT}
    assert dag.node(dag.terminal).text == ANSWER
    assert len(dag) == 4 and dag.stage(dag.terminal) == 2
    assert res.no_text == {"EMBEDDING": 1}

    # An observations page ({"data": [...]}) without the trace object: the top-level span
    # "pipeline" gives the question and the final output.
    page = tmp_path / "observations.json"
    page.write_text(json.dumps({"data": langfuse_trace()["observations"][1:], "meta": {"page": 1}}))
    dag2 = dag_from_trace(page).dag
    assert {dag2.node(r).text for r in dag2.roots} == set(CONTEXT) | {QUESTION}
    assert dag2.node(dag2.terminal).text == ANSWER


def test_format_is_detected_or_forced(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text(json.dumps([langfuse_trace()]))
    assert dag_from_trace(f, fmt="langfuse").dag.node(dag_from_trace(f).dag.terminal).text == ANSWER
    with pytest.raises(TraceError, match="OTLP JSON"):
        dag_from_trace(f, fmt="otlp")
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": []}')
    with pytest.raises(TraceError, match="not a trace this importer knows"):
        dag_from_trace(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"resourceSpans": [')
    with pytest.raises(TraceError, match="not valid JSON at line 1"):
        dag_from_trace(broken)


def span(i: str, kind: Kind, t0: int, t1: int, parent: str | None = "root", **kw: Any) -> TraceSpan:
    return TraceSpan(i, parent, "T", i, kind, t0, t1, t1, **kw)


def test_rejections(tmp_path: Path) -> None:
    # No generation at all.
    with pytest.raises(TraceError, match="no LLM generation"):
        build_dag([span("root", Kind.CHAIN, 0, 9, None, inputs=("some input text",))])
    # A generation without output text.
    with pytest.raises(TraceError, match="no LLM generation with output text"):
        build_dag(
            [span("root", Kind.CHAIN, 0, 9, None), span("g", Kind.LLM, 1, 2, inputs=("x y",))]
        )
    # A final output that no generation produced.
    with pytest.raises(TraceError, match="contains no LLM generation"):
        build_dag(
            [
                span(
                    "root",
                    Kind.CHAIN,
                    0,
                    9,
                    None,
                    inputs=("alpha beta gamma",),
                    outputs=("something else entirely",),
                ),
                span(
                    "g", Kind.LLM, 1, 2, inputs=("alpha beta gamma",), outputs=("a generated line",)
                ),
            ]
        )
    # Two traces and no choice.
    two = [
        TraceSpan("a", None, "T1", "a", Kind.LLM, 0, 1, 0, inputs=("p q",), outputs=("r s",)),
        TraceSpan("b", None, "T2", "b", Kind.LLM, 0, 1, 1, inputs=("p q",), outputs=("r s",)),
    ]
    with pytest.raises(TraceError, match="choose one with --trace-id"):
        build_dag(two)
    assert build_dag(two, trace_id="T2").trace_id == "T2"


def test_cycle_is_rejected() -> None:
    # Two generations with identical output are one node; the second read a text derived from
    # the first, so the merged node would depend on itself.
    spans = [
        span(
            "root",
            Kind.CHAIN,
            0,
            20,
            None,
            inputs=("the source document text",),
            outputs=("final words here",),
        ),
        span(
            "g1",
            Kind.LLM,
            1,
            2,
            inputs=("the source document text",),
            outputs=("same output text",),
        ),
        span("g2", Kind.LLM, 3, 4, inputs=("same output text",), outputs=("derived from it",)),
        span("g3", Kind.LLM, 5, 6, inputs=("derived from it",), outputs=("same output text",)),
        span("g4", Kind.LLM, 7, 8, inputs=("same output text",), outputs=("final words here",)),
    ]
    with pytest.raises(TraceError, match="cycle"):
        build_dag(spans)


def test_cli_rejects_with_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    trace = langfuse_trace()
    trace["observations"] = [o for o in trace["observations"] if o["type"] != "GENERATION"]
    f.write_text(json.dumps(trace))
    r = CliRunner().invoke(cli, ["from-trace", str(f), "--out", str(tmp_path / "d.json")])
    assert r.exit_code == 2
    assert r.output.startswith("error: ") and "no LLM generation" in r.output
    assert not (tmp_path / "d.json").exists()


def test_threshold_is_documented_and_settable() -> None:
    with pytest.raises(ValueError):
        MatchSettings(threshold=0)
    assert MatchSettings().threshold == 90.0


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_text_leaves_never_fails(value: Any) -> None:
    for leaf in text_leaves(value):
        assert isinstance(leaf, str) and leaf.strip()
    for leaf in text_leaves(json.dumps(value)):
        assert isinstance(leaf, str)


@pytest.mark.slow
def test_langfuse_dag_verifies_against_the_loopback_server(tmp_path: Path) -> None:
    f = tmp_path / "langfuse.json"
    f.write_text(json.dumps(langfuse_trace()), encoding="utf-8")
    dag_path = tmp_path / "dag.json"
    r = CliRunner().invoke(cli, ["from-trace", str(f), "--out", str(dag_path)])
    assert r.exit_code == 0, r.output
    claims = ["The summit hut opens in June.", "The cable car runs every twenty minutes."]
    proc, report, n_requests = verify_dag(dag_path, claims, ["june", "twenty"], tmp_path)
    assert n_requests, "the run made no model call"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [c["verdict"] for c in report["claims"]] == ["Fully Supported"] * 2
    # Each claim's trail reaches the retrieved passage that states it (not the question).
    assert provenance_roots(report, load_dag(dag_path)) == [{CONTEXT[0]}, {CONTEXT[1]}]
