"""BooookScore trace loaders on the real files in shared/data/booookscore."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from veritrail.adapters.booookscore import (
    BooookScoreError,
    TraceKind,
    hierarchical_book_dag,
    incremental_book_dag,
    load_book_dags,
    read_traces,
    safe_filename,
)
from veritrail.dag import load_dag

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "booookscore"
HIER = DATA / "claude-88000-hier.json"
INC = DATA / "claude-88000-inc.json"

needs_data = pytest.mark.skipif(not HIER.is_file(), reason="shared/data/booookscore not present")


@needs_data
def test_hierarchical_file_gives_100_books_with_levels_preserved() -> None:
    raw = json.loads(HIER.read_text(encoding="utf-8"))
    dags = load_book_dags(HIER)
    assert len(dags) == len(raw) == 100
    for book, dag in dags.items():
        sd = raw[book]["summaries_dict"]
        levels = sorted(int(k) for k in sd)
        # One stage per level, as many nodes per stage as summaries on that level.
        assert Counter(n.stage for n in dag) == {lv + 1: len(sd[str(lv)]) for lv in levels}
        assert sorted(dag.roots) == sorted(f"L0-{i + 1}" for i in range(len(sd["0"])))
        assert [dag.node(f"L0-{i + 1}").text for i in range(len(sd["0"]))] == sd["0"]
        # The top level's single summary is the final summary and the terminal, drawn from all
        # of level 0 (these files have two levels, so no grouping had to be assumed).
        assert dag.node(dag.terminal).text == raw[book]["final_summary"]
        assert set(dag.sources(dag.terminal)) == set(dag.roots)
        assert dag.meta["booookscore"]["assumed_grouping"] is False
        assert dag.meta["book"] == book


@needs_data
def test_incremental_file_gives_100_chains() -> None:
    raw = json.loads(INC.read_text(encoding="utf-8"))
    assert read_traces(INC)[0] is TraceKind.INCREMENTAL
    dags = load_book_dags(INC)
    assert len(dags) == 100 and set(dags) == set(raw)
    for book, dag in dags.items():
        steps = raw[book]
        assert len(dag) == len(steps) and len(dag.roots) == 1
        assert dag.terminal == f"S{len(steps)}" and dag.node(dag.terminal).text == steps[-1]
        for k in range(2, len(steps) + 1):
            assert dag.sources(f"S{k}") == (f"S{k - 1}",) and dag.stage(f"S{k}") == k


def test_deeper_hierarchy_assumes_consecutive_groups_with_context() -> None:
    entry = {
        "summaries_dict": {
            "0": [f"chunk {i}." for i in range(5)],
            "1": ["m1.", "m2."],
            "2": ["top."],
        },
        "final_summary": "top.",
    }
    dag = hierarchical_book_dag("b", entry)
    assert dag.sources("L1-1") == ("L0-1", "L0-2", "L0-3")
    assert dag.sources("L1-2") == ("L0-4", "L0-5", "L1-1")  # previous merge given as context
    assert dag.terminal == "L2-1" and dag.stage("L2-1") == 3
    assert dag.meta["booookscore"]["assumed_grouping"] is True
    # A final summary that differs from the top level gets its own node.
    entry2 = {"summaries_dict": {"0": ["a.", "b."], "1": ["m."]}, "final_summary": "edited m."}
    dag2 = hierarchical_book_dag("b", entry2)
    assert (
        dag2.terminal == "final" and dag2.sources("final") == ("L1-1",) and dag2.stage("final") == 3
    )


def test_malformed_entries_are_rejected_with_the_book_named() -> None:
    with pytest.raises(BooookScoreError, match="b level 1"):
        hierarchical_book_dag("b", {"summaries_dict": {"0": ["a."], "1": [""]}})
    with pytest.raises(BooookScoreError, match="gaps"):
        hierarchical_book_dag("b", {"summaries_dict": {"0": ["a."], "2": ["c."]}})
    with pytest.raises(BooookScoreError, match="more summaries"):
        hierarchical_book_dag("b", {"summaries_dict": {"0": ["a."], "1": ["c.", "d."]}})
    with pytest.raises(BooookScoreError, match="non-empty list"):
        incremental_book_dag("b", [])


@needs_data
def test_cli_converts_one_book_and_all_books(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from veritrail.cli.main import cli

    book = next(iter(json.loads(HIER.read_text(encoding="utf-8"))))
    out = tmp_path / "one.json"
    r = CliRunner().invoke(cli, ["from-booookscore", str(HIER), "--book", book, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert load_dag(out).meta["book"] == book
    r = CliRunner().invoke(cli, ["from-booookscore", str(INC), "--out-dir", str(tmp_path / "all")])
    assert r.exit_code == 0, r.output
    files = list((tmp_path / "all").glob("*.json"))
    assert len(files) == 100 and (tmp_path / "all" / safe_filename(book)).is_file()
    r = CliRunner().invoke(
        cli, ["from-booookscore", str(HIER), "--book", "nope", "--out", str(out)]
    )
    assert r.exit_code == 2 and "no book named" in r.output
