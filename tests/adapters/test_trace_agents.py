"""Agent traces in `from-trace`: a tool call's arguments as evidence (one root holding the call
and its result, linked through the result the next prompt holds), a conversation's earlier user
turns as roots, and an agent whose output is its chat state answering with its last message.
Spans are built from OpenInference attributes (`span_from_attributes`, what every OTLP or
opentelemetry-sdk file is read into)."""

from __future__ import annotations

import json
from typing import Any

from veritrail.adapters.trace import Kind, TraceSpan, build_dag
from veritrail.adapters.trace.otel import span_from_attributes

_seq = iter(range(10_000))


def span(sid: str, parent: str | None, kind: str, t0: int, t1: int, **attrs: Any) -> TraceSpan:
    return span_from_attributes(
        span_id=sid,
        parent_id=parent,
        trace_id="T",
        name=attrs.pop("name", sid),
        start=t0,
        end=t1,
        seq=next(_seq),
        attrs={
            "openinference.span.kind": kind,
            **{k.replace("__", "."): v for k, v in attrs.items()},
        },
    )


def llm(
    sid: str, parent: str | None, t0: int, t1: int, messages: list[tuple[str, str]], out: str
) -> TraceSpan:
    attrs: dict[str, Any] = {}
    for i, (role, content) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = content
    if out:
        attrs["llm.output_messages.0.message.content"] = out
    return span_from_attributes(
        span_id=sid,
        parent_id=parent,
        trace_id="T",
        name=sid,
        start=t0,
        end=t1,
        seq=next(_seq),
        attrs={"openinference.span.kind": "LLM", **attrs},
    )


RESULT = "Booking confirmed: LH 400 on 2026-05-04, seat 14C."
ANSWER = "I booked LH 400 for 3 May; your seat is 14C."
ASK = "Book LH 400 for me on 4 May 2026."


def agent_spans(tool_input: Any, *, state_output: bool = False) -> list[TraceSpan]:
    final: Any = ANSWER
    if state_output:
        final = json.dumps(
            {
                "messages": [
                    {"type": "human", "data": {"content": ASK}},
                    {"type": "tool", "data": {"content": RESULT}},
                    {"type": "ai", "data": {"content": ANSWER}},
                ]
            }
        )
    return [
        span("agent", None, "AGENT", 0, 10, input__value=ASK, output__value=final),
        llm("plan", "agent", 1, 2, [("user", ASK)], ""),
        span(
            "book",
            "agent",
            "TOOL",
            3,
            4,
            tool__name="book_flight",
            input__value=tool_input,
            output__value=RESULT,
        ),
        llm("answer", "agent", 5, 6, [("user", ASK), ("tool", RESULT)], ANSWER),
    ]


def test_a_tool_call_is_one_root_with_its_result() -> None:
    spans = agent_spans(json.dumps({"flight": "LH 400", "date": "2026-05-04"}))
    assert (
        spans[2].kind is Kind.TOOL
        and spans[2].call == 'book_flight(flight="LH 400", date="2026-05-04")'
    )
    res = build_dag(spans)
    dag = res.dag
    call = 'Tool call book_flight(flight="LH 400", date="2026-05-04") returned:\n' + RESULT
    assert {dag.node(r).text for r in dag.roots} == {ASK, call}
    assert dag.node(dag.terminal).text == ANSWER
    assert {dag.node(s).text for s in dag.sources(dag.terminal)} == {ASK, call}
    # Linked through its result, which the answering prompt holds.
    assert [(lk.how, lk.score) for lk in res.links if lk.source == "tool-1"] == [("result", 100.0)]


def test_a_tool_without_recorded_input_keeps_its_output_as_the_root() -> None:
    spans = agent_spans(None)
    assert spans[2].call == ""
    dag = build_dag(spans).dag
    assert {dag.node(r).text for r in dag.roots} == {ASK, RESULT}


def test_an_agent_answering_with_its_chat_state_ends_on_its_last_message() -> None:
    spans = agent_spans('{"flight": "LH 400"}', state_output=True)
    assert spans[0].outputs == (ANSWER,)
    dag = build_dag(spans).dag
    # The answer generation is the terminal, not a node made of the whole history.
    assert dag.node(dag.terminal).text == ANSWER and dag.terminal.startswith("gen-")


HISTORY = [
    ("system", "You are a travel assistant."),
    ("user", "I am Ada Okafor, frequent flyer number MM 4471."),
    ("assistant", "Hello Ada, where would you like to fly?"),
    ("user", ASK),
]
REPLY = "Ada Okafor (MM 4471) wants LH 400 on 4 May 2026."


def test_earlier_user_turns_of_a_prompt_become_roots() -> None:
    """The chain's input is only the new turn (the history came from a store): the earlier
    user turn is in the model's prompt alone."""
    spans = [
        span("chat", None, "CHAIN", 0, 10, input__value=ASK, output__value=REPLY),
        llm("model", "chat", 1, 2, HISTORY, REPLY),
    ]
    dag = build_dag(spans).dag
    assert {dag.node(r).text for r in dag.roots} == {HISTORY[1][1], ASK}
    assert set(dag.sources(dag.terminal)) == set(dag.roots)


def test_a_conversation_logged_as_one_llm_call_gives_its_user_turns() -> None:
    dag = build_dag([llm("model", None, 0, 1, HISTORY, REPLY)]).dag
    assert {dag.node(r).text for r in dag.roots} == {HISTORY[1][1], ASK}


def test_one_user_message_at_the_top_keeps_the_whole_prompt() -> None:
    """A single prompt (no conversation): the prompt is the root, as before, system text and
    all (it may carry the context)."""
    messages = [("system", "Context: LH 400 leaves at 10:15."), ("user", "When does LH 400 leave?")]
    dag = build_dag([llm("model", None, 0, 1, messages, "At 10:15.")]).dag
    (root,) = dag.roots
    assert "Context: LH 400 leaves at 10:15." in dag.node(root).text


def test_a_user_turn_holding_recorded_text_is_no_root() -> None:
    """An earlier user message that quotes a retrieved document is a template over it: the
    document is the root."""
    doc = "The Alder bridge opened in 1921 and carried trams across the Wend river."
    spans = [
        span(
            "chain",
            None,
            "CHAIN",
            0,
            10,
            input__value="When did the bridge open?",
            output__value="In 1921.",
        ),
        span("ret", "chain", "RETRIEVER", 1, 2, retrieval__documents__0__document__content=doc),
        llm(
            "model",
            "chain",
            3,
            4,
            [
                ("user", "Read this: " + doc),
                ("assistant", "Done."),
                ("user", "When did the bridge open?"),
            ],
            "In 1921.",
        ),
    ]
    dag = build_dag(spans).dag
    assert {dag.node(r).text for r in dag.roots} == {doc, "When did the bridge open?"}


def test_langfuse_tool_observations_give_the_call() -> None:
    from veritrail.adapters.trace.langfuse import read_langfuse

    trace = {
        "id": "t1",
        "input": ASK,
        "output": ANSWER,
        "observations": [
            {
                "id": "o1",
                "type": "TOOL",
                "name": "book_flight",
                "startTime": "2026-01-01T00:00:01Z",
                "endTime": "2026-01-01T00:00:02Z",
                "input": {"flight": "LH 400", "date": "2026-05-04"},
                "output": RESULT,
            },
            {
                "id": "o2",
                "type": "GENERATION",
                "name": "answer",
                "startTime": "2026-01-01T00:00:03Z",
                "endTime": "2026-01-01T00:00:04Z",
                "input": [
                    {"role": "user", "content": HISTORY[1][1]},
                    {"role": "assistant", "content": HISTORY[2][1]},
                    {"role": "user", "content": ASK},
                    {"role": "tool", "content": RESULT},
                ],
                "output": ANSWER,
            },
        ],
    }
    spans = read_langfuse([trace])
    by_id = {s.id: s for s in spans}
    assert by_id["o1"].call == 'book_flight(flight="LH 400", date="2026-05-04")'
    assert by_id["o2"].turns == (HISTORY[1][1], ASK)
    dag = build_dag(spans).dag
    call = 'Tool call book_flight(flight="LH 400", date="2026-05-04") returned:\n' + RESULT
    assert {dag.node(r).text for r in dag.roots} == {ASK, call, HISTORY[1][1]}
    assert dag.node(dag.terminal).text == ANSWER


def test_openllmetry_tool_spans_give_the_call() -> None:
    s = span_from_attributes(
        span_id="a",
        parent_id=None,
        trace_id="T",
        name="book.tool",
        start=0,
        end=1,
        seq=0,
        attrs={
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "book",
            "traceloop.entity.input": json.dumps({"args": ["LH 400"], "kwargs": {"seat": "14C"}}),
            "traceloop.entity.output": json.dumps(RESULT),
        },
    )
    assert s.kind is Kind.TOOL and s.call == 'book("LH 400", seat="14C")'
    assert s.outputs == (RESULT,)
