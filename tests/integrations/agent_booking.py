"""The flight-booking agent scenario the framework tests share (LangGraph, LlamaIndex, the OpenAI
Agents SDK): its turns, its two tools and what they return, the answer that misstates the date,
and the checks every framework's trace must pass once imported (`from-trace`) and verified
(`verify --model demo/overlap`), all through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from veritrail.cli.main import cli
from veritrail.dag import Dag, load_dag

FIRST_TURN = "Hi, I am Ada Okafor, frequent flyer number MM 4471."
GREETING = "Hello Ada, where would you like to fly?"
ASK = "Please book me on LH 400 from Frankfurt to New York on 4 May 2026."
SEARCH_RESULT = "LH 400 departs Frankfurt at 10:15 on 2026-05-04 and lands at JFK at 12:50."
BOOKING = "Booking confirmed: LH 400 on 2026-05-04, seat 14C, booking reference QX7Z."
ANSWER = (
    "The booking reference is QX7Z and the seat is 14C. "
    "LH 400 leaves Frankfurt on 3 May. "
    "Ada Okafor has frequent flyer number MM 4471."
)
SEARCH_CALL = 'Tool call search_flights(origin="FRA", destination="JFK", date="2026-05-04")'
BOOK_CALL = 'Tool call book_flight(flight="LH 400", date="2026-05-04", frequent_flyer="MM 4471")'


def search_flights(origin: str, destination: str, date: str) -> str:
    """Find flights between two airports on a date."""
    return SEARCH_RESULT


def book_flight(flight: str, date: str, frequent_flyer: str) -> str:
    """Book a seat on a flight."""
    return BOOKING


def import_trace(trace: Path) -> tuple[Path, Dag, str]:
    """`veritrail from-trace TRACE --explain` beside it: (dag path, DAG, the command's output)."""
    out = trace.with_name("dag.json")
    r = CliRunner().invoke(cli, ["from-trace", str(trace), "--out", str(out), "--explain"])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["meta"]["trace_format"] == "otlp"
    return out, load_dag(out), r.output


def by_text(dag: Dag, start: str) -> str:
    """The one node whose text starts with `start`."""
    hits = [n.id for n in dag if n.text.startswith(start)]
    assert len(hits) == 1, (start, [n.text for n in dag])
    return hits[0]


def roots_of_the_answer(dag: Dag) -> set[str]:
    """The tool calls (arguments and results) and both user turns, checked, as node ids."""
    search, book = by_text(dag, SEARCH_CALL), by_text(dag, BOOK_CALL)
    assert dag.node(search).text.endswith(SEARCH_RESULT)
    assert dag.node(book).text.endswith(BOOKING)
    # The tool-calling turns wrote no text: the answer is the one generation, and the terminal.
    assert dag.node(dag.terminal).text == ANSWER
    return {search, book, by_text(dag, FIRST_TURN), by_text(dag, ASK)}


def check_the_misstated_date(dag_path: Path, dag: Dag, tmp_path: Path) -> None:
    """The date the answer misstates is Not Fully Supported at the answering call (named in the
    terminal summary); the booking is supported by the tool call, the frequent flyer number by
    the first turn and the call's arguments."""
    report = tmp_path / "report.json"
    r = CliRunner().invoke(
        cli,
        [
            *("verify", str(dag_path), "--model", "demo/overlap"),
            *("--run-dir", str(tmp_path / "run"), "--out", str(report)),
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
    book = by_text(dag, "Tool call book_flight(")
    ok = claims["The booking reference is QX7Z and the seat is 14C."]
    assert ok["verdict"] == "Fully Supported"
    assert [book] in ok["provenance"]
    flyer = claims["Ada Okafor has frequent flyer number MM 4471."]
    assert flyer["verdict"] == "Fully Supported"
    assert sorted(flyer["provenance"]) == sorted([[by_text(dag, FIRST_TURN)], [book]])
    # The terminal summary names the step: the answering call's node.
    assert f"error stage {wrong['error_stages'][0]}, node {dag.terminal}" in r.output
