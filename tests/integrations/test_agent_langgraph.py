"""An agent from a real framework, end to end: LangGraph's prebuilt ReAct agent with a fake chat
model from langchain-core, traced by openinference-instrumentation-langchain into
opentelemetry-sdk's in-memory exporter, written as OTLP JSON (the real protobuf encoder) →
`veritrail from-trace` → `veritrail verify --model demo/overlap`, all through the CLI.

The agent searches flights, books one, and answers. The answer misstates the date the tools
gave (3 May; the call and its result say 2026-05-04): that claim is Not Fully Supported, its
error stage the answering LLM call, the one after the book_flight result. The booking
reference and seat, which the tool returned, are supported by the tool call's node; the
frequent flyer number by the user's earlier turn (a checkpointed conversation, whose first turn
was not traced) and the call's arguments. No network."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from agent_booking import (
    ANSWER,
    ASK,
    FIRST_TURN,
    by_text,
    check_the_misstated_date,
    import_trace,
    roots_of_the_answer,
)
from agent_booking import (
    book_flight as _book_flight,
)
from agent_booking import (
    search_flights as _search_flights,
)
from click.testing import CliRunner
from google.protobuf.json_format import MessageToJson
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag

search_flights = tool(_search_flights)
book_flight = tool(_book_flight)


class ToolCallingFake(FakeMessagesListChatModel):
    """langchain-core's fake chat model, given the `bind_tools` a ReAct agent calls (the fake
    replies carry their tool calls already)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def record_agent(path: Path, thought: str = "") -> None:
    """Two turns of one conversation (a checkpointer keeps the first); the second is traced.
    `thought`: text the model writes beside its book_flight call (a generation of its own)."""
    model = ToolCallingFake(
        responses=[
            AIMessage(content="Hello Ada, where would you like to fly?"),
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "search_flights",
                        "args": {"origin": "FRA", "destination": "JFK", "date": "2026-05-04"},
                        "id": "call_1",
                    }
                ],
            ),
            AIMessage(
                content=thought,
                tool_calls=[
                    {
                        "name": "book_flight",
                        "args": {
                            "flight": "LH 400",
                            "date": "2026-05-04",
                            "frequent_flyer": "MM 4471",
                        },
                        "id": "call_2",
                    }
                ],
            ),
            AIMessage(content=ANSWER),
        ]
    )
    with warnings.catch_warnings():
        # LangGraph 1.x points to langchain.agents (another package) for this agent and warns;
        # the prebuilt one is still LangGraph's own, and what this test exercises.
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            model, [search_flights, book_flight], checkpointer=InMemorySaver()
        )
    thread = {"configurable": {"thread_id": "ada"}}
    agent.invoke({"messages": [HumanMessage(FIRST_TURN)]}, thread)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        result = agent.invoke({"messages": [HumanMessage(ASK)]}, thread)
    finally:
        instrumentor.uninstrument()
    assert result["messages"][-1].content == ANSWER
    spans = list(exporter.get_finished_spans())
    path.write_text(MessageToJson(encode_spans(spans), indent=None) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dag]:
    trace = tmp_path_factory.mktemp("langgraph") / "trace.json"
    record_agent(trace)
    dag_path, dag, _ = import_trace(trace)
    return dag_path, dag


def test_tool_calls_and_the_earlier_turn_are_roots_of_the_answer(traced: tuple[Path, Dag]) -> None:
    _, dag = traced
    roots = roots_of_the_answer(dag)
    # The agent's final state answers with its last message, not the whole history.
    assert roots <= set(dag.roots)
    assert roots <= set(dag.sources(dag.terminal))


def test_the_misstated_date_is_not_supported_at_the_answering_call(
    traced: tuple[Path, Dag], tmp_path: Path
) -> None:
    check_the_misstated_date(*traced, tmp_path)


THOUGHT = "LH 400 leaves Frankfurt at 10:15 on 3 May. I will book it."


@pytest.mark.xfail(
    strict=True,
    reason="the answering call's prompt holds the earlier call's text and everything that call "
    "read, so both are its sources; the loop then judges the claim with the earlier call's text "
    "beside its sources and ends there (method/rounds.py, rule 1): Fully Supported",
)
def test_a_misstatement_an_earlier_call_made_is_found_at_that_call(tmp_path: Path) -> None:
    trace, dag_path = tmp_path / "trace.json", tmp_path / "dag.json"
    record_agent(trace, THOUGHT)
    r = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(dag_path)])
    assert r.exit_code == 0, r.output
    dag = load_dag(dag_path)
    thought = by_text(dag, THOUGHT)
    assert thought in dag.sources(dag.terminal)
    report = tmp_path / "report.json"
    args = ["verify", str(dag_path), "--model", "demo/overlap", "--out", str(report)]
    r = CliRunner().invoke(cli, [*args, "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    claims = {c["text"]: c for c in json.loads(report.read_text())["claims"]}
    wrong = claims["LH 400 leaves Frankfurt on 3 May."]
    assert wrong["verdict"] == "Not Fully Supported"
    assert wrong["error_stages"] == [dag.node(thought).stage]
