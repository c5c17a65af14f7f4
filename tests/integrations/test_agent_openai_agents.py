"""An agent from a real framework, end to end: the OpenAI Agents SDK (`openai-agents`), a real
`Agent` with two function tools and its model (`OpenAIChatCompletionsModel`) pointed at
veritrail's loopback fake OpenAI server, scripted to call the tools and answer; traced by
openinference-instrumentation-openai-agents into opentelemetry-sdk's in-memory exporter, written
as OTLP JSON (the real protobuf encoder) → `veritrail from-trace` → `veritrail verify --model
demo/overlap`, all through the CLI.

The agent searches flights, books one, and answers. The answer misstates the date the tools gave
(3 May; the call and its result say 2026-05-04): that claim is Not Fully Supported, its error
stage the answering LLM call, the one after the book_flight result. The booking reference and
seat, which the tool returned, are supported by the tool call's node; the frequent flyer number
by the user's earlier turn (given to the run as input items) and the call's arguments.

The SDK's agent and turn spans record no input: the user's messages reach the DAG as the turns
of the model calls' prompts (docs/adapters.md, "OpenAI Agents SDK"). No network: the
instrumentor replaces the SDK's own trace exporter, and the model talks to 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_booking import (
    ANSWER,
    ASK,
    FIRST_TURN,
    GREETING,
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
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from google.protobuf.json_format import MessageToJson
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from veritrail.dag import Dag
from veritrail.testing import FakeOpenAIServer

CALLS = [
    ("call_1", "search_flights", {"origin": "FRA", "destination": "JFK", "date": "2026-05-04"}),
    (
        "call_2",
        "book_flight",
        {"flight": "LH 400", "date": "2026-05-04", "frequent_flyer": "MM 4471"},
    ),
]


class AgentServer(FakeOpenAIServer):
    """The loopback server answering as a tool-calling model: one call per tool result the
    request does not hold yet (search, then book), then the answer (the responder's text)."""

    def _completion(self, request: dict[str, Any], content: str) -> dict[str, Any]:
        body = super()._completion(request, content)
        results = sum(1 for m in request.get("messages", []) if m.get("role") == "tool")
        if results < len(CALLS):
            cid, name, args = CALLS[results]
            call = {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            body["choices"][0]["message"] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [call],
            }
            body["choices"][0]["finish_reason"] = "tool_calls"
        return body


search_flights = function_tool(_search_flights)
book_flight = function_tool(_book_flight)


def record_agent(path: Path) -> None:
    """The second turn of a conversation (the first given as input items), traced."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with AgentServer(responder=lambda request: ANSWER) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key")
        agent = Agent(
            name="Booker",
            instructions="You book flights with the tools.",
            tools=[search_flights, book_flight],
            model=OpenAIChatCompletionsModel(model="gpt-fake", openai_client=client),
        )
        history: list[Any] = [
            {"role": "user", "content": FIRST_TURN},
            {"role": "assistant", "content": GREETING},
            {"role": "user", "content": ASK},
        ]
        instrumentor = OpenAIAgentsInstrumentor()
        # Exclusive (the default): the SDK's own exporter to OpenAI's servers is replaced.
        instrumentor.instrument(tracer_provider=provider)
        try:
            result = asyncio.run(Runner.run(agent, history))
        finally:
            instrumentor.uninstrument()
        assert server.count == 3
    assert result.final_output == ANSWER
    spans = list(exporter.get_finished_spans())
    path.write_text(MessageToJson(encode_spans(spans), indent=None) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dag]:
    trace = tmp_path_factory.mktemp("openai-agents") / "trace.json"
    record_agent(trace)
    dag_path, dag, _ = import_trace(trace)
    return dag_path, dag


def test_tool_calls_and_the_user_turns_are_roots_of_the_answer(traced: tuple[Path, Dag]) -> None:
    _, dag = traced
    roots = roots_of_the_answer(dag)
    # The agent's spans record no output: the last generation is the final output.
    assert set(dag.roots) == roots
    assert set(dag.sources(dag.terminal)) == roots


def test_the_misstated_date_is_not_supported_at_the_answering_call(
    traced: tuple[Path, Dag], tmp_path: Path
) -> None:
    check_the_misstated_date(*traced, tmp_path)
