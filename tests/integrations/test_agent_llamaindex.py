"""An agent from a real framework, end to end: llama-index-core's FunctionAgent (a workflow) with
llama-index's own MockFunctionCallingLLM scripted to call two FunctionTools and answer, traced by
openinference-instrumentation-llama-index into opentelemetry-sdk's in-memory exporter, written as
OTLP JSON (the real protobuf encoder) → `veritrail from-trace` → `veritrail verify --model
demo/overlap`, all through the CLI.

The agent searches flights, books one, and answers. The answer misstates the date the tools gave
(3 May; the call and its result say 2026-05-04): that claim is Not Fully Supported, its error
stage the answering LLM call, the one after the book_flight result. The booking reference and
seat, which the tool returned, are supported by the tool call's node; the frequent flyer number
by the user's earlier turn (given to the agent as chat history) and the call's arguments.

What the LlamaIndex instrumentation records that the importer reads differently from LangGraph's
(docs/adapters.md, "LlamaIndex agents"): the workflow steps' inputs and the run's output are
objects' reprs (never roots; the terminal is then the last generation), the tool-calling turns
render their empty text as 'assistant: None' (no node), and `_prepare_chat_with_tools` is an LLM
span whose output is the prompt (no node). No network."""

# No `from __future__ import annotations`: llama-index-core's @step reads annotations as types.
import asyncio
from pathlib import Path
from typing import Any

import pytest
from agent_booking import (
    ANSWER,
    ASK,
    FIRST_TURN,
    GREETING,
    book_flight,
    check_the_misstated_date,
    import_trace,
    roots_of_the_answer,
    search_flights,
)
from click.testing import CliRunner
from google.protobuf.json_format import MessageToJson
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag


def respond(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """The scripted model: search, then book (after the search's result), then answer."""
    results = sum(1 for m in messages if m.role == MessageRole.TOOL)
    if results == 0:
        call = ToolCallBlock(
            tool_call_id="call_1",
            tool_name="search_flights",
            tool_kwargs={"origin": "FRA", "destination": "JFK", "date": "2026-05-04"},
        )
    elif results == 1:
        call = ToolCallBlock(
            tool_call_id="call_2",
            tool_name="book_flight",
            tool_kwargs={"flight": "LH 400", "date": "2026-05-04", "frequent_flyer": "MM 4471"},
        )
    else:
        return ChatMessage(role=MessageRole.ASSISTANT, content=ANSWER)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


def record_agent(path: Path) -> None:
    """The second turn of a conversation (the first given as chat history), traced."""
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(search_flights), FunctionTool.from_defaults(book_flight)],
        llm=MockFunctionCallingLLM(response_generator=respond),
        system_prompt="You book flights with the tools.",
    )
    history = [
        ChatMessage(role=MessageRole.USER, content=FIRST_TURN),
        ChatMessage(role=MessageRole.ASSISTANT, content=GREETING),
    ]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)

    async def run() -> str:
        return str(await agent.run(ASK, chat_history=history))

    try:
        answer = asyncio.run(run())
    finally:
        instrumentor.uninstrument()
    assert answer == ANSWER
    spans = list(exporter.get_finished_spans())
    path.write_text(MessageToJson(encode_spans(spans), indent=None) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dag, str]:
    trace = tmp_path_factory.mktemp("llamaindex") / "trace.json"
    record_agent(trace)
    return import_trace(trace)


def test_tool_calls_and_the_user_turns_are_roots_of_the_answer(
    traced: tuple[Path, Dag, str],
) -> None:
    _, dag, explain = traced
    roots = roots_of_the_answer(dag)
    assert set(dag.roots) == roots
    assert set(dag.sources(dag.terminal)) == roots
    # No object's repr became a node; the run's repr output left the terminal to the generation.
    assert not any("ChatMessage(" in n.text or " object at 0x" in n.text for n in dag)
    assert "final output is an object's repr" in explain


def test_the_misstated_date_is_not_supported_at_the_answering_call(
    traced: tuple[Path, Dag, str], tmp_path: Path
) -> None:
    dag_path, dag, _ = traced
    check_the_misstated_date(dag_path, dag, tmp_path)


def test_a_repr_output_holding_the_whole_answer_is_no_node(tmp_path: Path) -> None:
    """A short answer fits in the run's `StopEvent(result=...)` repr: the terminal is still the
    generation, not an output node made of the repr."""
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(book_flight)],
        llm=MockFunctionCallingLLM(
            response_generator=lambda messages, **kw: ChatMessage(
                role=MessageRole.ASSISTANT, content="LH 400 is booked."
            )
        ),
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)

    async def run() -> str:
        return str(await agent.run(ASK))

    try:
        assert asyncio.run(run()) == "LH 400 is booked."
    finally:
        instrumentor.uninstrument()
    trace, out = tmp_path / "trace.json", tmp_path / "dag.json"
    spans = list(exporter.get_finished_spans())
    trace.write_text(MessageToJson(encode_spans(spans), indent=None) + "\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(out)])
    assert r.exit_code == 0, r.output
    dag = load_dag(out)
    assert dag.node(dag.terminal).text == "LH 400 is booked."
    assert [dag.node(r).text for r in dag.roots] == [ASK]
