"""LangChain map-reduce over four documents, with langchain-core's fake chat model:

* traced by openinference-instrumentation-langchain into opentelemetry-sdk's in-memory exporter,
  written as OTLP JSON (the real protobuf encoder + json_format) and as sdk span JSON, read by
  `veritrail from-trace` → a DAG with the expected roots, stages and edges, verified against the
  loopback fake OpenAI server;
* the same pipeline recorded by `DagCallbackHandler` → the same DAG.

One document is trimmed before its map call, so its edge needs the fuzzy matcher. No network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf.json_format import MessageToJson
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from trace_verify import provenance_roots, verify_dag

from veritrail.adapters.trace import TraceError, dag_from_trace
from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag
from veritrail.integrations.langchain import DagCallbackHandler

DOCS = [
    "The Alder bridge opened in 1921. It carried trams across the Wend river. "
    "Engineers praised its iron arches.",
    "The Wend river floods every spring. Farmers along its banks grow barley.",
    "Barley from the valley is malted in Corvin. The Corvin maltings employ forty people. "
    "They were founded in 1888 by a brewer from the coast. The founder later moved abroad and "
    "sold the business to a cooperative of farmers who still run it today.",
    "Trams stopped running in 1962. Buses replaced them on the bridge.",
]
TRIM = 150  # the map step reads only this many characters of each document
MAPS = [
    "The Alder bridge opened in 1921 and carried trams.",
    "The Wend river floods each spring; farmers grow barley.",
    "The Corvin maltings employ forty people.",
    "Buses replaced the trams in 1962.",
]
FINAL = (
    "The Alder bridge opened in 1921. Buses replaced the trams in 1962. "
    "The Corvin maltings employ forty people."
)


def make_chain() -> tuple[Runnable[Any, str], FakeListChatModel]:
    llm = FakeListChatModel(responses=[*MAPS, FINAL])
    map_prompt = ChatPromptTemplate.from_messages(
        [("system", "You summarise one document in one sentence."), ("human", "Document:\n{doc}")]
    )
    reduce_prompt = ChatPromptTemplate.from_messages(
        [("human", "Combine these summaries into one paragraph:\n\n{summaries}")]
    )
    map_chain = RunnableLambda(lambda d: {"doc": d[:TRIM]}) | map_prompt | llm | StrOutputParser()
    chain = (
        map_chain.map()
        | RunnableLambda(lambda ss: {"summaries": "\n\n".join(ss)})
        | reduce_prompt
        | llm
        | StrOutputParser()
    )
    return chain, llm


@pytest.fixture(scope="module")
def traced_spans() -> Iterator[list[ReadableSpan]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = LangChainInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        chain, _ = make_chain()
        # One map call at a time, so the fake model's answers go to the documents in order.
        assert chain.invoke(DOCS, config={"max_concurrency": 1}) == FINAL
    finally:
        inst.uninstrument()
    yield list(exporter.get_finished_spans())


def write_otlp(spans: list[ReadableSpan], path: Path) -> None:
    """OTLP JSON as the collector's file exporter writes it: one export request per line."""
    path.write_text(MessageToJson(encode_spans(spans), indent=None) + "\n", encoding="utf-8")


def write_sdk(spans: list[ReadableSpan], path: Path) -> None:
    path.write_text("\n".join(s.to_json(indent=None) for s in spans) + "\n", encoding="utf-8")


def shape(dag: Dag) -> set[tuple[str, int, frozenset[str]]]:
    """The DAG by texts (ids aside): (text, stage, source texts)."""
    return {(n.text, n.stage, frozenset(dag.node(s).text for s in n.sources)) for n in dag}


EXPECTED = (
    {(d, 1, frozenset()) for d in DOCS}
    | {(m, 2, frozenset({d})) for m, d in zip(MAPS, DOCS, strict=True)}
    | {(FINAL, 3, frozenset(MAPS))}
)


def test_otlp_json_file_gives_the_expected_dag(
    traced_spans: list[ReadableSpan], tmp_path: Path
) -> None:
    f = tmp_path / "trace.otlp.json"
    write_otlp(traced_spans, f)
    assert '"resourceSpans"' in f.read_text() and '"stringValue"' in f.read_text()
    res = dag_from_trace(f)
    assert res.dag.meta["trace_format"] == "otlp"
    assert shape(res.dag) == EXPECTED
    assert res.dag.node(res.dag.terminal).text == FINAL
    assert len(res.dag.roots) == 4
    # The trimmed document reached its map call only in part: a fuzzy link, scored.
    fuzzy = [lk for lk in res.links if lk.how == "fuzzy"]
    assert [res.dag.node(lk.source).text for lk in fuzzy] == [DOCS[2]]
    assert fuzzy[0].score >= 90
    assert not res.ambiguous


def test_sdk_span_json_gives_the_same_dag(traced_spans: list[ReadableSpan], tmp_path: Path) -> None:
    one_per_line = tmp_path / "spans.jsonl"
    write_sdk(traced_spans, one_per_line)
    as_list = tmp_path / "spans.json"
    as_list.write_text(
        json.dumps([json.loads(s.to_json()) for s in traced_spans]), encoding="utf-8"
    )
    pretty = tmp_path / "spans.txt"  # to_json() as printed: indented objects one after another
    pretty.write_text("\n".join(s.to_json() for s in traced_spans), encoding="utf-8")
    for f in (one_per_line, as_list, pretty):
        res = dag_from_trace(f)
        assert res.dag.meta["trace_format"] == "otel-sdk"
        assert shape(res.dag) == EXPECTED


def test_callback_handler_records_the_same_dag(tmp_path: Path) -> None:
    chain, _ = make_chain()
    handler = DagCallbackHandler()
    assert chain.invoke(DOCS, config={"max_concurrency": 1, "callbacks": [handler]}) == FINAL
    assert shape(handler.dag()) == EXPECTED
    saved = handler.save(tmp_path / "dag.json")
    assert shape(load_dag(tmp_path / "dag.json")) == shape(saved) == EXPECTED


def test_callback_handler_with_two_runs_needs_a_trace_id() -> None:
    handler = DagCallbackHandler()
    for _ in range(2):
        chain, _llm = make_chain()
        chain.invoke(DOCS, config={"max_concurrency": 1, "callbacks": [handler]})
    with pytest.raises(TraceError, match="trace_id="):
        handler.dag()
    tops = [s for s in handler.spans() if s.parent_id is None]
    assert len(tops) == 2
    assert shape(handler.dag(trace_id=tops[0].trace_id)) == EXPECTED
    handler.reset()
    assert handler.spans() == []


def test_cli_writes_the_dag_and_explains(traced_spans: list[ReadableSpan], tmp_path: Path) -> None:
    f = tmp_path / "trace.json"
    write_otlp(traced_spans, f)
    out = tmp_path / "dag.json"
    r = CliRunner().invoke(cli, ["from-trace", str(f), "--out", str(out), "--explain"])
    assert r.exit_code == 0, r.output
    assert "9 nodes, 8 edges" in r.output
    assert "links: 7 by containment, 1 fuzzy" in r.output
    assert re.search(r"fuzzy input-3 -> gen-3: score \d+", r.output)
    # openinference-instrumentation-langchain marks prompt templates PROMPT (CHAIN in its
    # oldest supported versions): either way they are no nodes.
    assert "(never nodes): PROMPT 5" in r.output or "PROMPT" not in r.output
    assert shape(load_dag(out)) == EXPECTED
    r = CliRunner().invoke(cli, ["dag", "validate", str(out)])
    assert r.exit_code == 0 and "4 roots, 3 stages" in r.output

    # Containment only: the trimmed document no longer reaches its summary, whose prompt
    # becomes a root of its own (and --explain says so).
    r = CliRunner().invoke(
        cli, ["from-trace", str(f), "--out", str(tmp_path / "d2.json"), "--no-fuzzy", "--explain"]
    )
    assert r.exit_code == 0, r.output
    assert "the whole prompt became root prompt-1" in r.output
    assert "input-3:" in r.output  # listed among the unused root candidates

    # --format that does not fit, and --out onto the input: exit 2, one line, input untouched.
    before = f.read_bytes()
    r = CliRunner().invoke(
        cli, ["from-trace", str(f), "--out", str(tmp_path / "x.json"), "--format", "langfuse"]
    )
    assert r.exit_code == 2 and r.output.startswith("error: ") and len(r.output.splitlines()) == 1
    r = CliRunner().invoke(cli, ["from-trace", str(f), "--out", str(f)])
    assert r.exit_code == 2 and "never overwritten" in r.output
    assert f.read_bytes() == before


def test_imported_dag_verifies_against_the_loopback_server(
    traced_spans: list[ReadableSpan], tmp_path: Path
) -> None:
    f = tmp_path / "trace.json"
    write_otlp(traced_spans, f)
    dag_path = tmp_path / "dag.json"
    r = CliRunner().invoke(cli, ["from-trace", str(f), "--out", str(dag_path)])
    assert r.exit_code == 0, r.output
    claims = ["The Alder bridge opened in 1921.", "The Corvin maltings employ forty people."]
    proc, report, n_requests = verify_dag(dag_path, claims, ["alder", "corvin"], tmp_path)
    assert n_requests, "the run made no model call"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [c["verdict"] for c in report["claims"]] == ["Fully Supported"] * 2
    # Provenance: terminal <- the map summary <- the source document, for each claim.
    dag = load_dag(dag_path)
    assert provenance_roots(report, dag) == [{DOCS[0]}, {DOCS[2]}]


def test_threshold_separates_edges_from_unrelated_pairs(
    traced_spans: list[ReadableSpan], tmp_path: Path
) -> None:
    """The measurement behind the default threshold (docs/adapters.md): for every generation and
    every node of an earlier stage, the best sentence score of the node in the generation's
    input. True edges score 100; nodes that are neither a source nor an ancestor stay far below."""
    from rapidfuzz import fuzz

    from veritrail.adapters.trace import normalize, read_trace
    from veritrail.method.segment import split_sentences

    f = tmp_path / "trace.json"
    write_otlp(traced_spans, f)
    _, spans = read_trace(f)
    dag = dag_from_trace(f).dag
    llm_inputs = {s.id: "\n\n".join(s.inputs) for s in spans if s.kind == "LLM"}
    edge_scores: list[float] = []
    unrelated: list[float] = []
    for v in dag:
        sids = [s for s in dag.meta["original_spans"][v.id] if s in llm_inputs]
        if not sids:
            continue
        text = normalize(llm_inputs[sids[0]]).casefold()
        ancestors: set[str] = set()
        stack = list(v.sources)
        while stack:
            a = stack.pop()
            if a not in ancestors:
                ancestors.add(a)
                stack += dag.sources(a)
        for u in dag:
            if dag.stage(u.id) >= v.stage:
                continue
            sents = [
                normalize(x).casefold() for x in split_sentences(u.text) if len(x.split()) >= 4
            ]
            if not sents:
                continue
            best = max(fuzz.partial_ratio(s, text) for s in sents)
            if u.id in v.sources:
                edge_scores.append(best)
            elif u.id not in ancestors:
                unrelated.append(best)
    assert len(edge_scores) == 8 and len(unrelated) == 12
    assert min(edge_scores) == 100
    assert max(unrelated) < 70 < 90  # printed in docs/adapters.md: 62.9


def test_prefilter_changes_nothing_on_the_fixture(
    traced_spans: list[ReadableSpan], tmp_path: Path
) -> None:
    from veritrail.adapters.trace import MatchSettings

    f = tmp_path / "trace.json"
    write_otlp(traced_spans, f)
    on, off = dag_from_trace(f), dag_from_trace(f, settings=MatchSettings(prefilter=False))
    assert [(n.id, n.text, n.sources) for n in on.dag] == [
        (n.id, n.text, n.sources) for n in off.dag
    ]
    assert on.links == off.links and on.ambiguous == off.ambiguous and on.unmatched == off.unmatched
