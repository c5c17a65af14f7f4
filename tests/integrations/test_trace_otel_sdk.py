"""Traces written by the real opentelemetry-sdk (span.to_json() and the OTLP protobuf encoder),
with attributes set by hand: ambiguous links reported by `--explain`, the OpenTelemetry GenAI
conventions (gen_ai.*, OpenLLMetry's traceloop.*) read as LLM, agent, tool and retriever spans,
and the fuzzy-matching prefilter changing no result. No network."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Tracer, set_span_in_context

from veritrail.adapters.trace import (
    Kind,
    MatchSettings,
    TraceSpan,
    build_dag,
    dag_from_trace,
    read_trace,
)
from veritrail.adapters.trace import build as trace_build
from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag

T0 = 1_750_000_000_000_000_000  # explicit span times (ns): the order never depends on the clock


class Recorder:
    """An opentelemetry-sdk tracer with an in-memory exporter, spans opened at given times."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer: Tracer = provider.get_tracer("veritrail-tests")

    def span(
        self, name: str, t0: int, parent: Span | None = None, attrs: Mapping[str, Any] | None = None
    ) -> Span:
        ctx = set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            name, context=ctx, attributes=dict(attrs or {}), start_time=T0 + t0 * 1000
        )

    def done(self, span: Span, t1: int, **attrs: Any) -> None:
        for k, v in attrs.items():
            span.set_attribute(k.replace("__", "."), v)
        span.end(end_time=T0 + t1 * 1000)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def write_sdk(spans: list[ReadableSpan], path: Path) -> Path:
    path.write_text("\n".join(s.to_json(indent=None) for s in spans) + "\n", encoding="utf-8")
    return path


def write_otlp(spans: list[ReadableSpan], path: Path) -> Path:
    path.write_text(MessageToJson(encode_spans(spans), indent=None) + "\n", encoding="utf-8")
    return path


def llm_attrs(messages: list[tuple[str, str]], output: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for i, (role, content) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = content
    attrs["llm.output_messages.0.message.role"] = "assistant"
    attrs["llm.output_messages.0.message.content"] = output
    return attrs


def run_cli(trace: Path, tmp_path: Path) -> tuple[str, Dag]:
    out = tmp_path / "dag.json"
    r = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(out), "--explain"])
    assert r.exit_code == 0, r.output
    v = CliRunner().invoke(cli, ["dag", "validate", str(out)])
    assert v.exit_code == 0, v.output
    return r.output, load_dag(out)


# -- ambiguous links ------------------------------------------------------------------------------

D_BRIDGE = "The Alder bridge opened in 1921. It carried trams across the Wend river."
D_BUSES = "It carried trams across the Wend river. Buses replaced them in 1962."
QUESTION = "What crossed the Alder bridge?"


def test_overlapping_matches_are_reported_as_ambiguous(tmp_path: Path) -> None:
    """Two retrieved passages overlap (a chunker's overlap window): the prompt holds the merged
    text, so both occur in it and their occurrences overlap without nesting."""
    rec = Recorder()
    root = rec.span("pipeline", 0, attrs={"openinference.span.kind": "CHAIN"})
    root.set_attribute("input.value", QUESTION)
    ret = rec.span("retrieve", 1, root, {"openinference.span.kind": "RETRIEVER"})
    rec.done(
        ret,
        2,
        retrieval__documents__0__document__content=D_BRIDGE,
        retrieval__documents__1__document__content=D_BUSES,
    )
    merged = "The Alder bridge opened in 1921. It carried trams across the Wend river. Buses replaced them in 1962."
    answer = "Trams crossed the Alder bridge until buses replaced them in 1962."
    llm = rec.span(
        "answer",
        3,
        root,
        llm_attrs([("system", "Context:\n" + merged), ("user", QUESTION)], answer),
    )
    rec.done(llm, 4)
    rec.done(root, 5, output__value=answer)
    f = write_sdk(rec.spans(), tmp_path / "spans.jsonl")

    out, dag = run_cli(f, tmp_path)
    assert "ambiguous links: 1" in out
    assert "doc-1, doc-2 into span answer" in out
    assert "their matches overlap in the input; both linked" in out
    assert {dag.node(s).text for s in dag.sources(dag.terminal)} == {QUESTION, D_BRIDGE, D_BUSES}


def test_text_found_only_inside_a_non_ancestor_is_reported(tmp_path: Path) -> None:
    """A summary quotes a passage its own prompt never held (the model knew it): the next call
    reads the summary, so the passage occurs there only inside the summary, which does not
    derive from it. It gets no edge, and --explain says why."""
    d_hut = "The summit hut opens in June."
    d_car = "The Oro cable car was built in 1974 and runs every twenty minutes."
    rec = Recorder()
    root = rec.span("pipeline", 0, attrs={"openinference.span.kind": "CHAIN"})
    ret = rec.span("retrieve", 1, root, {"openinference.span.kind": "RETRIEVER"})
    rec.done(
        ret,
        2,
        retrieval__documents__0__document__content=d_car,
        retrieval__documents__1__document__content=d_hut,
    )
    summary = "The cable car dates from 1974. The summit hut opens in June."
    g1 = rec.span("summarise", 3, root, llm_attrs([("user", "Summarise:\n" + d_car)], summary))
    rec.done(g1, 4)
    final = "Take the 1974 cable car; the hut opens in June."
    g2 = rec.span("answer", 5, root, llm_attrs([("user", "Answer from: " + summary)], final))
    rec.done(g2, 6)
    rec.done(root, 7, output__value=final)
    f = write_sdk(rec.spans(), tmp_path / "spans.jsonl")

    out, dag = run_cli(f, tmp_path)
    assert "ambiguous links: 1" in out
    assert "doc-2, gen-1 into span answer" in out
    assert "doc-2's text appears in the input only inside gen-1's, which does not derive" in out
    # The DAG keeps the edges the texts prove: car -> summary -> answer; the hut passage is unused.
    assert [dag.node(s).text for s in dag.sources(dag.terminal)] == [summary]
    assert {dag.node(r).text for r in dag.roots} == {d_car}
    assert "doc-2: The summit hut opens in June." in out


# -- OpenTelemetry GenAI conventions -----------------------------------------------------------

CONTEXT = [
    "Mount Oro is 2,310 metres high. Its summit hut opens in June.",
    "The Oro cable car was built in 1974. It runs every twenty minutes in summer.",
]
ORO_Q = "When can I reach the summit of Mount Oro?"
ORO_A = "The summit hut opens in June, and the cable car runs every twenty minutes in summer."


def openllmetry_spans() -> list[ReadableSpan]:
    """A RAG run as OpenLLMetry (traceloop-sdk) records it: @workflow and @tool spans with
    traceloop.entity.input/output, and an OpenAI chat span with gen_ai.prompt.N.* /
    gen_ai.completion.N.* and llm.request.type."""
    rec = Recorder()
    wf = rec.span(
        "rag.workflow",
        0,
        attrs={
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "rag",
            "traceloop.entity.input": json.dumps({"args": [ORO_Q], "kwargs": {}}),
        },
    )
    tool = rec.span(
        "search.tool",
        1,
        wf,
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.input": json.dumps({"args": [ORO_Q], "kwargs": {"k": 2}}),
        },
    )
    rec.done(tool, 2, traceloop__entity__output=json.dumps(CONTEXT))
    chat = rec.span(
        "openai.chat",
        3,
        wf,
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Answer from this context only:\n\n" + "\n\n".join(CONTEXT),
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": ORO_Q,
        },
    )
    rec.done(
        chat,
        4,
        gen_ai__completion__0__role="assistant",
        gen_ai__completion__0__content=ORO_A,
        gen_ai__usage__prompt_tokens=80,
    )
    emb = rec.span("openai.embeddings", 1, wf, {"llm.request.type": "embedding"})
    rec.done(emb, 1)
    rec.done(wf, 5, traceloop__entity__output=json.dumps(ORO_A))
    return rec.spans()


WEATHER = "In Oslo it is sunny today, with a light breeze from the fjord and 21 degrees."
PLAN = "It is sunny and 21 degrees in Oslo today: a good evening for the fjord walk."
PLAN_Q = "What should I do in Oslo tonight?"


def semconv_spans() -> list[ReadableSpan]:
    """An agent run with the current GenAI semantic conventions: invoke_agent, chat (JSON
    gen_ai.input.messages / gen_ai.output.messages with parts), execute_tool, embeddings."""
    rec = Recorder()
    user = {"role": "user", "parts": [{"type": "text", "content": PLAN_Q}]}
    call = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}
        ],
    }
    agent = rec.span(
        "invoke_agent planner",
        0,
        attrs={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "planner",
            "gen_ai.input.messages": json.dumps(
                [{"role": "system", "parts": [{"type": "text", "content": "Plan evenings."}]}, user]
            ),
        },
    )
    c1 = rec.span(
        "chat gpt-4o",
        1,
        agent,
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([user])},
    )
    rec.done(c1, 2, gen_ai__output__messages=json.dumps([{**call, "finish_reason": "tool_call"}]))
    tool = rec.span(
        "execute_tool get_weather",
        3,
        agent,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": json.dumps({"city": "Oslo"}),
        },
    )
    rec.done(tool, 4, gen_ai__tool__call__result=WEATHER)
    emb = rec.span("embeddings", 4, agent, {"gen_ai.operation.name": "embeddings"})
    rec.done(emb, 4)
    unknown = rec.span("rerank", 4, agent, {"gen_ai.operation.name": "some_future_operation"})
    rec.done(unknown, 4)
    c2 = rec.span(
        "chat gpt-4o",
        5,
        agent,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps(
                [{"type": "text", "content": "Plan evenings."}]
            ),
            "gen_ai.input.messages": json.dumps(
                [
                    user,
                    call,
                    {
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": "c1", "response": WEATHER}],
                    },
                ]
            ),
        },
    )
    out = [
        {"role": "assistant", "parts": [{"type": "text", "content": PLAN}], "finish_reason": "stop"}
    ]
    rec.done(c2, 6, gen_ai__output__messages=json.dumps(out))
    rec.done(agent, 7, gen_ai__output__messages=json.dumps(out))
    return rec.spans()


def test_openllmetry_spans_give_the_rag_dag(tmp_path: Path) -> None:
    f = write_sdk(openllmetry_spans(), tmp_path / "spans.jsonl")
    _, spans = read_trace(f)
    kinds = {s.name: s.kind for s in spans}
    assert kinds == {
        "rag.workflow": Kind.CHAIN,
        "search.tool": Kind.TOOL,
        "openai.chat": Kind.LLM,
        "openai.embeddings": Kind.OTHER,
    }
    out, dag = run_cli(f, tmp_path)
    assert {dag.node(r).text for r in dag.roots} == {ORO_Q, *CONTEXT}
    assert dag.node(dag.terminal).text == ORO_A
    assert {dag.node(s).text for s in dag.sources(dag.terminal)} == {ORO_Q, *CONTEXT}
    assert "ambiguous links: 0" in out


@pytest.mark.parametrize("encoding", ["otel-sdk", "otlp"])
def test_genai_semconv_spans_give_the_agent_dag(encoding: str, tmp_path: Path) -> None:
    spans = semconv_spans()
    f = (write_sdk if encoding == "otel-sdk" else write_otlp)(spans, tmp_path / "trace.json")
    fmt, read = read_trace(f)
    assert fmt == encoding
    kinds = {(s.name, s.kind) for s in read}
    assert kinds == {
        ("invoke_agent planner", Kind.AGENT),
        ("chat gpt-4o", Kind.LLM),
        ("execute_tool get_weather", Kind.TOOL),
        ("embeddings", Kind.EMBEDDING),
        ("rerank", Kind.OTHER),
    }
    res = dag_from_trace(f)
    dag = res.dag
    # The agent's user message and the tool call with its result are the roots (its system
    # instructions are configuration); the tool-calling turn wrote no text; the answer read both
    # roots (the call's node through its result).
    call = f'Tool call get_weather(city="Oslo") returned:\n{WEATHER}'
    assert {dag.node(r).text for r in dag.roots} == {PLAN_Q, call}
    assert dag.node(dag.terminal).text == PLAN
    assert {dag.node(s).text for s in dag.sources(dag.terminal)} == {PLAN_Q, call}
    assert {lk.how for lk in res.links} == {"exact", "result"}
    assert res.no_text == {"EMBEDDING": 1, "OTHER": 1}
    assert any("no output text" in n.note for n in res.unmatched)


def test_openinference_kind_wins_over_genai_attributes() -> None:
    from veritrail.adapters.trace.otel import span_from_attributes

    s = span_from_attributes(
        span_id="a",
        parent_id=None,
        trace_id="t",
        name="x",
        start=0,
        end=1,
        seq=0,
        attrs={
            "openinference.span.kind": "CHAIN",
            "gen_ai.operation.name": "chat",
            "input.value": "some input text",
        },
    )
    assert s.kind is Kind.CHAIN and s.inputs == ("some input text",)


# -- the fuzzy-matching prefilter ---------------------------------------------------------------


@pytest.fixture
def stats() -> Iterator[dict[str, int]]:
    trace_build.STATS.clear()
    yield trace_build.STATS
    trace_build.STATS.clear()


def synthetic_map_reduce(n_docs: int, seed: int) -> list[TraceSpan]:
    """Documents trimmed to their first sentence in map prompts (fuzzy links), summaries
    combined exactly; shared common words everywhere, as in prose."""
    rng = random.Random(seed)
    common = ["the", "of", "and", "with", "from", "that", "this", "which", "were", "their"]
    vocab = [
        f"{a}{b}{c}{d}"
        for a in "bdkmrstvz"
        for b in ("ara", "elo", "inu", "oka", "ure", "ami")
        for c in "lnxr"
        for d in ("a", "is", "on", "et", "um")
    ]

    def sentence() -> str:
        words = [rng.choice(common) if rng.random() < 0.4 else rng.choice(vocab) for _ in range(10)]
        return " ".join(words).capitalize() + "."

    docs = [" ".join(sentence() for _ in range(3)) for _ in range(n_docs)]
    spans = [
        TraceSpan("r", "root", "T", "retrieve", Kind.RETRIEVER, 1, 2, 0, documents=tuple(docs))
    ]
    t, maps = 3, []
    for g in range(0, n_docs, 4):
        prompt = "Summarise:\n" + "\n".join(d.split(". ")[0] for d in docs[g : g + 4])
        out = sentence()
        spans.append(
            TraceSpan(
                f"m{g}", "root", "T", "map", Kind.LLM, t, t + 1, len(spans), (prompt,), (out,)
            )
        )
        maps.append(out)
        t += 2
    final = sentence() + " " + sentence()
    spans.append(
        TraceSpan(
            "f", "root", "T", "reduce", Kind.LLM, t, t + 1, len(spans), ("\n".join(maps),), (final,)
        )
    )
    spans.append(
        TraceSpan("root", None, "T", "pipeline", Kind.CHAIN, 0, t + 2, len(spans), outputs=(final,))
    )
    return spans


def _shape(dag: Dag) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(n.id, n.text, tuple(n.sources)) for n in dag]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_prefilter_changes_no_result(seed: int, stats: dict[str, int]) -> None:
    spans = synthetic_map_reduce(48, seed)
    on = build_dag(spans)
    compared_on, pairs_skipped = stats.get("fuzzy_calls", 0), stats.get("pairs_skipped", 0)
    stats.clear()
    off = build_dag(spans, settings=MatchSettings(prefilter=False))
    compared_off = stats.get("fuzzy_calls", 0)
    assert _shape(on.dag) == _shape(off.dag)
    assert on.links == off.links and on.ambiguous == off.ambiguous
    assert len(on.dag.roots) == 48
    assert sum(lk.how == "fuzzy" for lk in on.links) == 48  # every document, through fuzzy
    # Most comparisons were ruled out, most of them by the word index before any sentence.
    assert pairs_skipped > 0 and 10 * compared_on < compared_off
