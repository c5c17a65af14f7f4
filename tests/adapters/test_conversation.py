"""`veritrail check --conversation FILE`: an OpenAI chat transcript as a DAG (roots: system
messages, user turns, tool calls with their results; a stage per assistant message), checked
through the CLI with the keyless demonstration model, and bad files refused with one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from veritrail.adapters.conversation import ConversationError, conversation_dag
from veritrail.adapters.trace.calls import call_statement, tool_call_text
from veritrail.cli.main import cli

EXAMPLE = Path(__file__).parents[2] / "examples" / "conversation" / "booking.json"


def test_the_example_gives_a_stage_per_assistant_message() -> None:
    dag = conversation_dag(json.loads(EXAMPLE.read_text(encoding="utf-8")))
    assert [n.id for n in dag] == [
        "m1-system",
        "m2-user",
        "m4-tool-search_flights",
        "m5-assistant",
        "m6-tool-book_flight",
        "m7-assistant",
    ]
    assert set(dag.roots) == {
        "m1-system",
        "m2-user",
        "m4-tool-search_flights",
        "m6-tool-book_flight",
    }
    assert dag.node("m4-tool-search_flights").text.startswith(
        'Tool call search_flights(origin="FRA", destination="JFK", date="2026-05-04") returned:\n'
        "LH 400 departs Frankfurt"
    )
    # Each assistant message reads the previous one and what came after it.
    assert list(dag.sources("m5-assistant")) == ["m1-system", "m2-user", "m4-tool-search_flights"]
    assert list(dag.sources("m7-assistant")) == ["m5-assistant", "m6-tool-book_flight"]
    assert dag.terminal == "m7-assistant"
    assert [dag.node(i).stage for i in ("m5-assistant", "m7-assistant")] == [2, 3]
    assert dag.meta["stage_names"] == {
        "1": "system messages, user turns, tool calls and their results",
        "2": "assistant message 5, after the search_flights result (message 4)",
        "3": "assistant message 7 (the final output), after the book_flight result (message 6)",
    }


def test_check_names_the_assistant_message_that_first_said_it(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    r = CliRunner().invoke(
        cli,
        [
            "check",
            "--conversation",
            str(EXAMPLE),
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
    ok = claims["The booking reference is QX7Z and the seat is 14C."]
    assert ok["verdict"] == "Fully Supported"
    assert ok["provenance"] == [["m6-tool-book_flight"]]
    # The answer repeats what assistant message 5 said after the search result: 3 May, where
    # the tools said 2026-05-04. The error stage is message 5's.
    wrong = claims["LH 400 leaves Frankfurt on 3 May."]
    assert wrong["verdict"] == "Not Fully Supported"
    assert wrong["error_stages"] == [2]
    assert "error stage 2, node m5-assistant" in r.output
    # The number the user gave, and the booking call carried.
    assert claims["Ada Okafor has frequent flyer number MM 4471."]["verdict"] == "Fully Supported"
    # The run directory keeps the DAG, named after the file: `veritrail resume` works.
    assert json.loads((tmp_path / "run" / "dag.json").read_text())["meta"]["source"] == (
        "conversation"
    )


def _messages(*msgs: dict[str, Any]) -> list[dict[str, Any]]:
    return list(msgs)


def test_content_parts_legacy_functions_and_unanswered_calls() -> None:
    doc = {
        "model": "gpt-4o",
        "messages": _messages(
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is the weather in Oslo?"},
                    {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
            {"role": "function", "name": "get_weather", "content": "Sunny, 21 degrees."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "a", "function": {"name": "notify", "arguments": "not json"}},
                    {"id": "b", "function": {"name": "notify", "arguments": {"to": "Ada"}}},
                ],
            },
            {"role": "assistant", "content": "It is sunny and 21 degrees in Oslo."},
            {"role": "user", "content": "Thanks!"},
        ),
    }
    dag = conversation_dag(doc)
    texts = {n.id: n.text for n in dag}
    assert texts == {
        "m1-developer": "Be brief.",
        "m2-user": "What is the weather in Oslo?",
        "m4-tool-get_weather": 'Tool call get_weather(city="Oslo") returned:\nSunny, 21 degrees.',
        "m5-call-notify": 'Tool call notify("not json") was made; no result is recorded.',
        "m5-call-notify-2": 'Tool call notify(to="Ada") was made; no result is recorded.',
        "m6-assistant": "It is sunny and 21 degrees in Oslo.",
    }
    assert dag.terminal == "m6-assistant"  # the message after it is not read


@pytest.mark.parametrize(
    ("name", "arguments", "statement"),
    [
        (
            "book",
            '{"flight": "LH 400", "date": "2026-05-03"}',
            'book(flight="LH 400", date="2026-05-03")',
        ),
        ("count", {"n": 2, "exact": True, "tags": ["a"]}, 'count(n=2, exact=true, tags=["a"])'),
        ("f", {"args": ["x", 1], "kwargs": {"k": None}}, 'f("x", 1, k=null)'),
        ("f", {"odd key": "v"}, 'f("odd key"="v")'),
        ("f", "", "f()"),
        ("f", 'say "hi"', 'f("say \\"hi\\"")'),
        ("  ", None, "tool()"),
    ],
)
def test_call_statements(name: str, arguments: Any, statement: str) -> None:
    assert call_statement(name, arguments) == statement


def test_tool_call_text() -> None:
    assert tool_call_text("f()", "ok") == "Tool call f() returned:\nok"
    assert tool_call_text("f()", "  ") == "Tool call f() returned nothing."
    assert tool_call_text("f()", None) == "Tool call f() was made; no result is recorded."


BAD = {
    "not_json": ("{nope", "not valid JSON"),
    "not_messages": (
        '{"model": "gpt-4o"}',
        'expected a list of chat messages, or an object with a "messages" list',
    ),
    "bad_role": ('[{"role": "robot", "content": "x"}]', "message 1, role: Input should be"),
    "no_assistant": (
        '[{"role": "user", "content": "hi"}]',
        "the conversation has no assistant message",
    ),
    "empty_answer": (
        '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "}]',
        "the last assistant message (message 2) has no text",
    ),
    "call_without_name": (
        '[{"role": "assistant", "content": "x", "tool_calls": [{"function": {}}]}]',
        "message 1, tool_calls.0.function.name: Field required",
    ),
    "content_number": ('[{"role": "assistant", "content": 3}]', "message 1, content"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_conversation_file_exits_2_with_one_line(case: str, tmp_path: Path) -> None:
    text, message = BAD[case]
    f = tmp_path / "chat.json"
    f.write_text(text, encoding="utf-8")
    run_dir = tmp_path / "run"
    r = CliRunner().invoke(
        cli,
        ["check", "--conversation", str(f), "--model", "demo/overlap", "--run-dir", str(run_dir)],
    )
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.output
    assert "Traceback" not in r.output
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--conversation", "{ex}", "answer.txt"],
            "--conversation FILE takes no ANSWER or SOURCE: the file holds both",
        ),
        (
            ["--conversation", "{ex}", "--chunk-sentences", "3"],
            "--chunk-sentences and --chunk-tokens cut SOURCE files, not a conversation",
        ),
        (["--conversation", "missing.json"], "conversation file missing.json not found"),
        (["--conversation", "-"], "--conversation reads a file, not stdin (-)"),
        ([], "give ANSWER and at least one SOURCE (or --conversation FILE)"),
        (["answer.txt"], "give ANSWER and at least one SOURCE (or --conversation FILE)"),
    ],
)
def test_conversation_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    argv = [a.replace("{ex}", str(EXAMPLE)) for a in args]
    r = CliRunner().invoke(
        cli, ["check", *argv, "--model", "demo/overlap", "--run-dir", str(tmp_path / "r")]
    )
    assert r.exit_code == 2, r.output
    assert r.output.strip() == f"error: {message}"


def test_conversation_error_is_an_input_problem() -> None:
    with pytest.raises(ConversationError, match="no assistant message"):
        conversation_dag([])
