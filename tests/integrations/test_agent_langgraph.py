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

FIRST_TURN = "Hi, I am Ada Okafor, frequent flyer number MM 4471."
ASK = "Please book me on LH 400 from Frankfurt to New York on 4 May 2026."
SEARCH_RESULT = "LH 400 departs Frankfurt at 10:15 on 2026-05-04 and lands at JFK at 12:50."
BOOKING = "Booking confirmed: LH 400 on 2026-05-04, seat 14C, booking reference QX7Z."
ANSWER = (
    "The booking reference is QX7Z and the seat is 14C. "
    "LH 400 leaves Frankfurt on 3 May. "
    "Ada Okafor has frequent flyer number MM 4471."
)


class ToolCallingFake(FakeMessagesListChatModel):
    """langchain-core's fake chat model, given the `bind_tools` a ReAct agent calls (the fake
    replies carry their tool calls already)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def search_flights(origin: str, destination: str, date: str) -> str:
    """Find flights between two airports on a date."""
    return SEARCH_RESULT


@tool
def book_flight(flight: str, date: str, frequent_flyer: str) -> str:
    """Book a seat on a flight."""
    return BOOKING


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
    d = tmp_path_factory.mktemp("langgraph")
    trace = d / "trace.json"
    record_agent(trace)
    out = d / "dag.json"
    r = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(out), "--explain"])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["meta"]["trace_format"] == "otlp"
    return out, load_dag(out)


def _by_text(dag: Dag, start: str) -> str:
    hits = [n.id for n in dag if n.text.startswith(start)]
    assert len(hits) == 1, (start, [n.text for n in dag])
    return hits[0]


def test_tool_calls_and_the_earlier_turn_are_roots_of_the_answer(traced: tuple[Path, Dag]) -> None:
    _, dag = traced
    search = _by_text(
        dag, 'Tool call search_flights(origin="FRA", destination="JFK", date="2026-05-04")'
    )
    book = _by_text(
        dag,
        'Tool call book_flight(flight="LH 400", date="2026-05-04", frequent_flyer="MM 4471")',
    )
    assert dag.node(search).text.endswith(SEARCH_RESULT)
    assert dag.node(book).text.endswith(BOOKING)
    first, ask = _by_text(dag, FIRST_TURN), _by_text(dag, ASK)
    # The tool-calling turns wrote no text: the answer is the one generation, and the terminal
    # (the agent's final state answers with its last message, not the whole history).
    assert dag.node(dag.terminal).text == ANSWER
    assert {search, book, first, ask} <= set(dag.roots)
    assert {search, book, first, ask} <= set(dag.sources(dag.terminal))


def test_the_misstated_date_is_not_supported_at_the_answering_call(
    traced: tuple[Path, Dag], tmp_path: Path
) -> None:
    dag_path, dag = traced
    report = tmp_path / "report.json"
    r = CliRunner().invoke(
        cli,
        [
            "verify",
            str(dag_path),
            "--model",
            "demo/overlap",
            "--run-dir",
            str(tmp_path / "run"),
            "--out",
            str(report),
        ],
    )
    assert r.exit_code == 0, r.output
    claims = {c["text"]: c for c in json.loads(report.read_text())["claims"]}
    assert set(claims) == {
        "The booking reference is QX7Z and the seat is 14C.",
        "LH 400 leaves Frankfurt on 3 May.",
        "Ada Okafor has frequent flyer number MM 4471.",
    }
    wrong = claims["LH 400 leaves Frankfurt on 3 May."]
    assert wrong["verdict"] == "Not Fully Supported"
    assert wrong["error_stages"] == [dag.node(dag.terminal).stage]
    book = _by_text(dag, "Tool call book_flight(")
    ok = claims["The booking reference is QX7Z and the seat is 14C."]
    assert ok["verdict"] == "Fully Supported"
    assert [book] in ok["provenance"]
    flyer = claims["Ada Okafor has frequent flyer number MM 4471."]
    assert flyer["verdict"] == "Fully Supported"
    assert sorted(flyer["provenance"]) == sorted([[_by_text(dag, FIRST_TURN)], [book]])
    # The terminal summary names the step: the answering call's node.
    assert f"error stage {wrong['error_stages'][0]}, node {dag.terminal}" in r.output


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
    thought = _by_text(dag, THOUGHT)
    assert thought in dag.sources(dag.terminal)
    report = tmp_path / "report.json"
    args = ["verify", str(dag_path), "--model", "demo/overlap", "--out", str(report)]
    r = CliRunner().invoke(cli, [*args, "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    claims = {c["text"]: c for c in json.loads(report.read_text())["claims"]}
    wrong = claims["LH 400 leaves Frankfurt on 3 May."]
    assert wrong["verdict"] == "Not Fully Supported"
    assert wrong["error_stages"] == [dag.node(thought).stage]
