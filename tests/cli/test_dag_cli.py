"""`veritrail dag validate` and `veritrail dag stats`: every validation rule through the CLI.

Each bad DAG must exit with status 2 and name the code and the ids at fault.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from veritrail.cli.main import cli
from veritrail.method.tokens import estimate_tokens


def _write(tmp_path: Path, nodes: Any, name: str = "dag.json") -> Path:
    p = tmp_path / name
    if name.endswith(".jsonl"):
        p.write_text("".join(json.dumps(n) + "\n" for n in nodes), encoding="utf-8")
    else:
        p.write_text(
            json.dumps(nodes if not isinstance(nodes, list) else {"nodes": nodes}), encoding="utf-8"
        )
    return p


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def N(nid: str, *sources: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """A node record."""
    return {
        "id": nid,
        "text": f"Text of {nid}." if text is None else text,
        "sources": list(sources),
        **extra,
    }


GOOD = [N("r1"), N("r2"), N("m", "r1", "r2"), N("t", "m")]


def _invalid(tmp_path: Path, nodes: Any, name: str = "dag.json") -> str:
    res = _run("dag", "validate", str(_write(tmp_path, nodes, name)))
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ")
    assert "invalid DAG" in res.output.splitlines()[0]
    return res.output


def _problem_line(output: str, code: str) -> str:
    lines = [ln for ln in output.splitlines() if f"[{code}]" in ln]
    assert lines, f"no [{code}] line in:\n{output}"
    return lines[0]


def test_valid_dag_prints_one_line_summary(tmp_path: Path) -> None:
    res = _run("dag", "validate", str(_write(tmp_path, GOOD)))
    assert res.exit_code == 0
    lines = res.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("OK: ")
    assert "4 nodes, 3 edges, 2 roots, 3 stages (computed), terminal 't'" in lines[0]


def test_valid_jsonl_with_given_stages(tmp_path: Path) -> None:
    nodes = [N("r1", stage=1), N("r2", stage=1), N("m", "r1", "r2", stage=3), N("t", "m", stage=5)]
    res = _run("dag", "validate", str(_write(tmp_path, nodes, "dag.jsonl")))
    assert res.exit_code == 0
    assert "3 stages (given), terminal 't'" in res.output


def test_validate_json_output(tmp_path: Path) -> None:
    res = _run("dag", "validate", "--json", str(_write(tmp_path, GOOD)))
    doc = json.loads(res.output)
    assert doc["valid"] is True
    assert (doc["nodes"], doc["edges"], doc["roots"], doc["stages"], doc["terminal"]) == (
        4,
        3,
        2,
        3,
        "t",
    )


def test_cycle_names_the_cycle_in_edge_order(tmp_path: Path) -> None:
    # a -> b -> c -> a, and t reads c.
    out = _invalid(tmp_path, [N("a", "c"), N("b", "a"), N("c", "b"), N("t", "c")])
    line = _problem_line(out, "cycle")
    assert line.endswith(": a, b, c")


def test_self_loop_is_a_cycle(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("r"), N("s", "r", "s"), N("t", "s")])
    assert _problem_line(out, "cycle").endswith(": s")


def test_every_cycle_is_reported(tmp_path: Path) -> None:
    nodes = [N("r"), N("a", "r", "b"), N("b", "a"), N("x", "r", "y"), N("y", "x"), N("t", "b", "y")]
    out = _invalid(tmp_path, nodes)
    cycles = [ln for ln in out.splitlines() if "[cycle]" in ln]
    assert len(cycles) == 2
    assert cycles[0].endswith(": a, b")
    assert cycles[1].endswith(": x, y")


def test_unknown_source_names_node_and_missing_id(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("r"), N("m", "r", "ghost"), N("t", "m", "phantom")])
    line = _problem_line(out, "unknown_source")
    assert "m<-ghost" in line
    assert "t<-phantom" in line


def test_duplicate_ids(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("r"), N("r", text="again"), N("m", "r"), N("m", "r"), N("t", "m")])
    assert _problem_line(out, "duplicate_id").endswith(": r, m")


def test_duplicate_source(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("r"), N("t", "r", "r")])
    assert "t<-r" in _problem_line(out, "duplicate_source")


def test_several_terminals(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("r"), N("t1", "r"), N("t2", "r")])
    line = _problem_line(out, "several_terminals")
    assert "found 2" in line
    assert line.endswith(": t1, t2")


def test_no_terminal(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("a", "b"), N("b", "a")])
    _problem_line(out, "no_terminal")
    assert _problem_line(out, "cycle").endswith(": a, b")


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text(tmp_path: Path, text: str) -> None:
    out = _invalid(tmp_path, [N("r"), N("m", "r", text=text), N("t", "m")])
    assert _problem_line(out, "empty_text").endswith(": m")


def test_stage_decreasing_along_an_edge(tmp_path: Path) -> None:
    nodes = [N("r", stage=1), N("m", "r", stage=3), N("n", "m", stage=2), N("t", "n", stage=4)]
    out = _invalid(tmp_path, nodes)
    line = _problem_line(out, "stage_decreases")
    assert "e.g. m (3) -> n (2)" in line
    assert line.endswith(": n<-m")


def test_partial_stages(tmp_path: Path) -> None:
    out = _invalid(tmp_path, [N("r", stage=1), N("m", "r"), N("t", "m", stage=3)])
    assert _problem_line(out, "partial_stages").endswith(": m")


def test_root_not_at_minimal_stage(tmp_path: Path) -> None:
    nodes = [N("r1", stage=1), N("r2", stage=2), N("m", "r1", "r2", stage=2), N("t", "m", stage=3)]
    out = _invalid(tmp_path, nodes)
    assert _problem_line(out, "root_stage").endswith(": r2")


@pytest.mark.parametrize(
    ("record", "fault", "ids"),
    [
        (7, "non-empty string id", "#2"),
        ({"text": "no id"}, "non-empty string id", "#2"),
        ({"id": "", "text": "x"}, "non-empty string id", "#2"),
        ({"id": "m", "text": 5, "sources": ["r"]}, '"text" must be a string', "m"),
        ({"id": "m", "text": "x", "sources": "r"}, '"sources" must be a list', "m"),
        ({"id": "m", "text": "x", "sources": ["r", 3]}, '"sources" must be a list', "m"),
        (
            {"id": "m", "text": "x", "sources": ["r"], "stage": 0},
            '"stage" must be a positive integer',
            "m",
        ),
        (
            {"id": "m", "text": "x", "sources": ["r"], "stage": True},
            '"stage" must be a positive integer',
            "m",
        ),
        (
            {"id": "m", "text": "x", "sources": ["r"], "stage": "2"},
            '"stage" must be a positive integer',
            "m",
        ),
    ],
)
def test_malformed_records(tmp_path: Path, record: Any, fault: str, ids: str) -> None:
    out = _invalid(tmp_path, [N("r"), record, N("t", "r")])
    lines = [ln for ln in out.splitlines() if "[malformed_node]" in ln and fault in ln]
    assert lines, out
    assert lines[0].endswith(f": {ids}")


def test_malformed_jsonl_lines_named_by_line(tmp_path: Path) -> None:
    p = tmp_path / "dag.jsonl"
    p.write_text(
        '{"id": "r", "text": "Root."}\n'
        "\n"
        '{"id": "m", "text": "broken", "sources": ["r"]\n'
        "[1, 2]\n"
        '{"id": "t", "text": "End.", "sources": ["m"]}\n',
        encoding="utf-8",
    )
    res = _run("dag", "validate", str(p))
    assert res.exit_code == 2
    bad = _problem_line(res.output, "bad_json")
    assert ":3 (node 'm')" in bad
    assert bad.endswith(": line 3")
    # The broken line's id is still known, so "t<-m" is not reported as an unknown source.
    assert "[unknown_source]" not in res.output
    assert _problem_line(res.output, "malformed_node").endswith(": line 4")


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    nodes = [
        N("r"),
        N("r"),
        N("e", "r", text=" "),
        N("u", "r", "nowhere"),
        N("c1", "c2"),
        N("c2", "c1"),
        N("t", "e", "u", "c2"),
        N("t2", "r"),
    ]
    out = _invalid(tmp_path, nodes)
    for code, ids in [
        ("duplicate_id", ": r"),
        ("empty_text", ": e"),
        ("unknown_source", ": u<-nowhere"),
        ("several_terminals", ": t, t2"),
    ]:
        assert _problem_line(out, code).endswith(ids)
    assert _problem_line(out, "cycle").endswith(": c1, c2")
    assert out.splitlines()[0].endswith(": invalid DAG (5 problems):")


def test_invalid_json_output_lists_problems(tmp_path: Path) -> None:
    p = _write(tmp_path, [N("r"), N("t1", "r"), N("t2", "r")])
    res = _run("dag", "validate", "--json", str(p))
    assert res.exit_code == 2
    doc = json.loads(res.output)
    assert doc["valid"] is False
    assert doc["problems"] == [
        {
            "code": "several_terminals",
            "message": "exactly one terminal node (a node no other node lists as a source) is allowed, found 2",
            "ids": ["t1", "t2"],
        }
    ]


def test_unreadable_file(tmp_path: Path) -> None:
    res = _run("dag", "validate", str(tmp_path / "missing.json"))
    assert res.exit_code == 2
    assert res.output == f"error: DAG file {tmp_path / 'missing.json'}: not found\n"
    res = _run("dag", "validate", "--json", str(tmp_path / "missing.json"))
    assert res.exit_code == 2
    assert json.loads(res.output)["problems"][0]["code"] == "unreadable"


def test_not_json(tmp_path: Path) -> None:
    p = tmp_path / "dag.json"
    p.write_text('{"nodes": [', encoding="utf-8")
    res = _run("dag", "validate", str(p))
    assert res.exit_code == 2
    assert res.output.startswith(f"error: DAG file {p}: not valid JSON: ")
    res = _run("dag", "validate", "--json", str(p))
    assert json.loads(res.output)["problems"][0]["code"] == "bad_json"


@pytest.mark.parametrize("doc", [{"node": []}, {"nodes": {}}, "text", 3])
def test_wrong_top_level_shape(tmp_path: Path, doc: Any) -> None:
    p = tmp_path / "dag.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    res = _run("dag", "validate", str(p))
    assert res.exit_code == 2
    assert res.output.startswith(f"error: DAG file {p}: expected")
    assert '"nodes" list' in res.output
    res = _run("dag", "validate", "--json", str(p))
    assert json.loads(res.output)["problems"][0]["code"] == "bad_format"


def test_empty_dag(tmp_path: Path) -> None:
    out = _invalid(tmp_path, {"nodes": []})
    _problem_line(out, "empty_dag")


def test_stats_text(tmp_path: Path) -> None:
    nodes = [
        N("r1", text="a" * 40),
        N("r2", text="b" * 8),
        N("m", "r1", "r2", text="c" * 12),
        N("t", "m"),
    ]
    res = _run("dag", "stats", str(_write(tmp_path, nodes)))
    assert res.exit_code == 0
    out = res.output
    assert "4 nodes, 3 edges" in out
    assert "roots: 2" in out
    assert "terminal: 't' (stage 3, 1 sources)" in out
    assert "fan-in (sources per non-root node): mean 1.50, median 1.5, max 2 (m)" in out


def test_stats_json_counts_tokens_per_stage(tmp_path: Path) -> None:
    nodes = [
        N("r1", text="a" * 40),
        N("r2", text="b" * 8),
        N("m", "r1", "r2", text="c" * 12),
        N("t", "m"),
    ]
    res = _run("dag", "stats", "--json", str(_write(tmp_path, nodes)))
    doc = json.loads(res.output)
    want_tokens = {
        1: estimate_tokens("a" * 40) + estimate_tokens("b" * 8),
        2: 3,
        3: estimate_tokens("Text of t."),
    }
    assert {row["stage"]: row["tokens"] for row in doc["per_stage"]} == want_tokens
    assert {row["stage"]: row["nodes"] for row in doc["per_stage"]} == {1: 2, 2: 1, 3: 1}
    assert doc["tokens"] == sum(want_tokens.values())
    assert doc["fan_out"]["max"] == 1
    assert doc["fan_in"] == {"count": 2, "mean": 1.5, "median": 1.5, "max": 2, "max_node": "m"}


def test_stats_on_invalid_dag_exits_2(tmp_path: Path) -> None:
    res = _run("dag", "stats", str(_write(tmp_path, [N("r"), N("t", "r", "x")])))
    assert res.exit_code == 2
    assert "t<-x" in res.output


def test_console_script_exit_status(tmp_path: Path) -> None:
    """The installed entry point, as a real process: status 2 and the ids on stderr."""
    bad = _write(tmp_path, [N("r"), N("t1", "r"), N("t2", "r")])
    code = "from veritrail.cli.main import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "dag", "validate", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "[several_terminals]" in proc.stderr
    assert "t1, t2" in proc.stderr
    good = _write(tmp_path, GOOD, "good.json")
    proc = subprocess.run(
        [sys.executable, "-c", code, "dag", "validate", str(good)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("OK: ")
